// The benchmark finds libblitz.so at run time where blitz-sys found it.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_BLITZ_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_BLITZ_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
