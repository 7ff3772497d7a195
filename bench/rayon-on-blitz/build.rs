// Names the runtime in the program's JSON lines (bench/rayon/src/harness.rs).
fn main() {
    println!("cargo:rustc-env=BENCH_IMPL=rayon on libblitz");
}
