// blitz-sys's rpath reaches only its own tests; this one gives this crate's
// tests, examples and doctests the same run-time path to libblitz.so.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_BLITZ_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_BLITZ_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
