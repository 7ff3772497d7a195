// `links = "rayon-core"` needs a build script, as it does in rayon-core
// itself: the key only makes sure that a build holds one rayon-core (one
// global pool); nothing is linked or generated here.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
