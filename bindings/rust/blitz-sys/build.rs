// Provides libblitz (compiled here, or found on the system), links it, and
// measures the C ABI.
//
// Two ways to get the library:
//
// * Bundled (the `bundled` feature, on by default), unless BLITZ_LIB_DIR is
//   set: lib/*.cpp are compiled here with the `cc` crate into a static
//   libblitz.a, linked into the program with libatomic_ops (static, as
//   meson links it) and the C++ runtime (libstdc++). The program needs no
//   libblitz.so at run time: no rpath, no LD_LIBRARY_PATH. The list of
//   sources and the library's own arguments are read from the checkout's
//   meson.build (its `lib_sources = files(...)` and `lib_args = [...]`),
//   and the project defaults meson applies (C++20, -O3, NDEBUG: the release
//   buildtype) are set below; what was used is written to
//   $OUT_DIR/bundled-build.txt, which bundled-vs-meson.sh compares with
//   `meson introspect` so the two builds cannot drift apart.
//
// * System (without `bundled`, or with BLITZ_LIB_DIR set): a libblitz.so
//   looked for, in order:
//   1. BLITZ_LIB_DIR (a directory holding libblitz.so);
//   2. `pkg-config --libs blitz` (the pkg-config command; PKG_CONFIG names another one);
//   3. the C compiler's own library path (`cc -print-file-name=libblitz.so`):
//      an installed libblitz where pkg-config is missing, such as Debian's
//      libblitz-dev in /usr/lib/<multiarch>;
//   4. the checkout's Meson build directory, ../../../build from this crate.
//   The header comes from BLITZ_INCLUDE_DIR, else from where the library was
//   found: pkg-config's includedir, the file `#include <blitz.h>` reaches, or
//   the checkout's include/ directory.
//
// Which one was used is printed as a cargo warning; when none of them has
// the library, the build stops with a message that says what to do.
//
// The ABI probe: a C program generated from the header itself (every
// BLZ_* constant and enum value with its C type's signedness and size,
// every struct's size, alignment and field offsets and sizes) is compiled
// with the C compiler ($CC, else cc) and run;
// its output goes to $OUT_DIR/c_abi.txt and a copy of the header to
// $OUT_DIR/blitz.h, which tests/abi_mirror.rs compares with the Rust
// declarations. A failure here does not stop the build: c_abi.txt then
// holds an "error" line, and the mirror test fails with it.
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "abi/header.rs"]
mod header;

struct Found {
    how: String,
    lib_dirs: Vec<PathBuf>,
    /// Directory to put in the rpath of this crate's own tests and of dependents that ask.
    runtime_dir: Option<PathBuf>,
    include_dir: Option<PathBuf>,
}

fn checkout_root() -> PathBuf {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    manifest.join("..").join("..").join("..")
}

fn normalize(p: PathBuf) -> PathBuf {
    fs::canonicalize(&p).unwrap_or(p)
}

fn env_path(name: &str) -> Option<PathBuf> {
    println!("cargo:rerun-if-env-changed={}", name);
    match env::var_os(name) {
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => None,
    }
}

fn pkg_config(args: &[&str]) -> Option<String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The directory of the libblitz.so that `cc -lblitz` links with no -L, and
/// that of the blitz.h that `#include <blitz.h>` reaches with no -I.
fn system_library() -> Option<(PathBuf, Option<PathBuf>)> {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc).arg("-print-file-name=libblitz.so").output().ok()?;
    let lib = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // gcc and clang answer a bare name when they do not find the file.
    if !out.status.success() || !lib.is_absolute() || !lib.exists() {
        return None;
    }
    let lib_dir = normalize(lib.parent()?.to_path_buf());

    let mut preprocess = Command::new(&cc)
        .args(["-E", "-x", "c", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    preprocess.stdin.take()?.write_all(b"#include <blitz.h>\n").ok()?;
    let out = preprocess.wait_with_output().ok()?;
    // Line markers name each file read: # 1 "/usr/include/blitz.h"
    let header_dir = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|line| line.starts_with("# "))
        .filter_map(|line| line.split('"').nth(1))
        .find(|path| path.ends_with("/blitz.h"))
        .and_then(|path| Path::new(path).parent().map(|dir| normalize(dir.to_path_buf())));
    Some((lib_dir, header_dir))
}

fn find_library() -> Found {
    let include_override = env_path("BLITZ_INCLUDE_DIR");
    let checkout_include = normalize(checkout_root().join("include"));
    let checkout_include = if checkout_include.join("blitz.h").is_file() { Some(checkout_include) } else { None };

    if let Some(dir) = env_path("BLITZ_LIB_DIR") {
        let dir = normalize(dir);
        if !dir.join("libblitz.so").exists() {
            panic!("blitz-sys: BLITZ_LIB_DIR={} holds no libblitz.so", dir.display());
        }
        return Found {
            how: format!("BLITZ_LIB_DIR={}", dir.display()),
            lib_dirs: vec![dir.clone()],
            runtime_dir: Some(dir),
            include_dir: include_override.or(checkout_include),
        };
    }

    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    if let Some(libs) = pkg_config(&["--libs", "blitz"]) {
        let lib_dirs: Vec<PathBuf> =
            libs.split_whitespace().filter_map(|flag| flag.strip_prefix("-L")).map(PathBuf::from).collect();
        let libdir = pkg_config(&["--variable=libdir", "blitz"]).filter(|d| !d.is_empty()).map(PathBuf::from);
        let includedir = pkg_config(&["--variable=includedir", "blitz"]).filter(|d| !d.is_empty()).map(PathBuf::from);
        return Found {
            how: format!("`pkg-config --libs blitz` ({})", libs),
            lib_dirs,
            runtime_dir: libdir,
            include_dir: include_override.or(includedir),
        };
    }

    if let Some((dir, header_dir)) = system_library() {
        return Found {
            how: format!("the C compiler's library path ({})", dir.display()),
            lib_dirs: vec![dir.clone()],
            runtime_dir: Some(dir),
            include_dir: include_override.or(header_dir),
        };
    }

    let build = normalize(checkout_root().join("build"));
    if !build.join("libblitz.so").exists() {
        // Fail here with the remedy rather than later with a linker error.
        panic!(
            "blitz-sys: libblitz not found: set BLITZ_LIB_DIR to the directory of libblitz.so, \
             install libblitz (Debian: libblitz-dev; or blitz.pc where pkg-config finds it), or build this checkout (`./dev build` makes {})",
            build.join("libblitz.so").display()
        );
    }
    println!("cargo:rerun-if-changed={}", build.join("libblitz.so").display());
    Found {
        how: format!("the checkout's build directory {}", build.display()),
        lib_dirs: vec![build.clone()],
        runtime_dir: Some(build),
        include_dir: include_override.or(checkout_include),
    }
}

/// Makes `to` hold a symbolic link to each `libblitz.so*` of `from` (a copy
/// where links cannot be made), replacing what was there: the links follow
/// a library rebuilt in place. Returns `to`.
fn link_into(from: &Path, to: &Path) -> std::io::Result<PathBuf> {
    if to.exists() {
        fs::remove_dir_all(to)?;
    }
    fs::create_dir_all(to)?;
    let mut linked = 0;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("libblitz.so") {
            continue;
        }
        let target = from.join(&name);
        #[cfg(unix)]
        let made = std::os::unix::fs::symlink(&target, to.join(&name));
        #[cfg(not(unix))]
        let made = fs::copy(&target, to.join(&name)).map(|_| ());
        if made.is_err() {
            fs::copy(&target, to.join(&name))?;
        }
        linked += 1;
    }
    if linked == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no libblitz.so* in {}", from.display()),
        ));
    }
    Ok(to.to_path_buf())
}

/// The C program that prints the header's ABI facts, one per line.
fn probe_source(h: &header::Header) -> String {
    let mut c = String::new();
    c.push_str("#include <stddef.h>\n#include <stdio.h>\n#include \"blitz.h\"\n\nint main(void) {\n");
    for name in &h.constants {
        // The value, whether its C type is unsigned (`1u`: `0 * x - 1` wraps
        // to the maximum, where a signed type gives -1; `> 0` rather than
        // `< 0` because -Wtype-limits refuses an unsigned `< 0`) and its size.
        writeln!(
            c,
            "    printf(\"const {n} %lld %d %zu\\n\", (long long)({n}), (int)(0 * ({n}) - 1 > 0), sizeof({n}));",
            n = name
        )
        .unwrap();
    }
    for name in &h.opaque {
        // An opaque type must stay incomplete: only a pointer to it is used.
        writeln!(c, "    {{ {n} *p = NULL; (void)p; printf(\"opaque {n}\\n\"); }}", n = name).unwrap();
    }
    for (name, _) in &h.scalars {
        writeln!(
            c,
            "    printf(\"scalar {n} %zu %zu %d\\n\", sizeof({n}), (size_t)_Alignof({n}), ({n})-1 < ({n})0);",
            n = name
        )
        .unwrap();
    }
    for p in &h.callbacks {
        writeln!(c, "    printf(\"callback {n} %zu\\n\", sizeof({n}));", n = p.name).unwrap();
    }
    for (name, fields) in &h.structs {
        writeln!(c, "    printf(\"struct {n} %zu %zu\\n\", sizeof({n}), (size_t)_Alignof({n}));", n = name).unwrap();
        for f in fields {
            writeln!(
                c,
                "    printf(\"field {n} {f} %zu %zu\\n\", offsetof({n}, {f}), sizeof((({n} *)0)->{f}));",
                n = name,
                f = f.name
            )
            .unwrap();
        }
    }
    c.push_str("    return 0;\n}\n");
    c
}

/// Generates, compiles and runs the probe. Returns its output or an error text.
fn run_probe(include_dir: &Path, out_dir: &Path) -> Result<String, String> {
    let header_path = include_dir.join("blitz.h");
    let text = fs::read_to_string(&header_path).map_err(|e| format!("cannot read {}: {}", header_path.display(), e))?;
    fs::write(out_dir.join("blitz.h"), &text).map_err(|e| e.to_string())?;
    let h = header::parse(&text);
    let source = out_dir.join("abi_probe.c");
    fs::write(&source, probe_source(&h)).map_err(|e| e.to_string())?;
    let exe = out_dir.join("abi_probe");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .arg("-std=c11")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(include_dir)
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("cannot run the C compiler {:?}: {}", cc, e))?;
    if !out.status.success() {
        return Err(format!("{} failed on the probe: {}", cc, String::from_utf8_lossy(&out.stderr).replace('\n', " ")));
    }
    let run = Command::new(&exe).output().map_err(|e| format!("cannot run the probe: {}", e))?;
    if !run.status.success() {
        return Err("the probe failed".to_string());
    }
    Ok(String::from_utf8_lossy(&run.stdout).into_owned())
}

/// The quoted strings of meson.build's statement that starts with `start`
/// (`lib_sources = files(` or `lib_args = [`), up to its closing bracket.
#[cfg(feature = "bundled")]
fn meson_list(meson_build: &str, start: &str) -> Vec<String> {
    let at = meson_build
        .find(start)
        .unwrap_or_else(|| panic!("blitz-sys: meson.build has no `{}`: the bundled build reads it from there", start));
    let close = if start.ends_with('(') { ')' } else { ']' };
    let body = &meson_build[at + start.len()..];
    let body = &body[..body.find(close).expect("blitz-sys: meson.build: unclosed list")];
    // Every other piece between single quotes is a string; comments hold none here.
    body.split('\'').skip(1).step_by(2).map(str::to_string).collect()
}

/// Compiles libblitz from the checkout's lib/ into OUT_DIR/libblitz.a and
/// links it statically, with libatomic_ops and libstdc++. Returns the
/// include directory (for the ABI probe).
#[cfg(feature = "bundled")]
fn build_bundled(out_dir: &Path) -> PathBuf {
    let root = normalize(checkout_root());
    let meson_build_path = root.join("meson.build");
    let meson_build = fs::read_to_string(&meson_build_path).unwrap_or_else(|e| {
        panic!(
            "blitz-sys: the bundled build needs libblitz's sources ({}: {}); \
             build without the `bundled` feature, or set BLITZ_LIB_DIR, to use an installed libblitz",
            meson_build_path.display(),
            e
        )
    });
    println!("cargo:rerun-if-changed={}", meson_build_path.display());
    let sources = meson_list(&meson_build, "lib_sources = files(");
    // -DBLZ_BUILDING_LIBRARY (only BLZ_API symbols visible), the visibility
    // flags and -g; the `fence` option's non-default `std` value adds
    // -DBLZ_FENCE_STD in meson.build: the bundled build keeps the default
    // (libatomic_ops' AO_nop_full).
    let lib_args = meson_list(&meson_build, "lib_args = [");
    let include = root.join("include");
    let lib = root.join("lib");

    let mut build = cc::Build::new();
    build.cpp(true).include(&include).include(&lib);
    // meson.build's default_options: cpp_std=c++20; buildtype=release is
    // -O3 (whatever cargo's profile, as a meson-built libblitz.so would be);
    // b_ndebug=if-release is -DNDEBUG. warning_level=3 only adds warnings.
    // Meson also defines _FILE_OFFSET_BITS=64 in every compile (large files).
    build.flag("-std=c++20").opt_level(3).define("NDEBUG", None).define("_FILE_OFFSET_BITS", "64").pic(true);
    build.debug(false); // meson's -g comes from lib_args, below
    for arg in &lib_args {
        build.flag(arg);
    }
    // The Threads dependency: -pthread, as meson compiles with it.
    build.flag("-pthread");
    let mut record = String::new();
    for source in &sources {
        let path = root.join(source);
        println!("cargo:rerun-if-changed={}", path.display());
        build.file(&path);
        writeln!(record, "source {}", source).unwrap();
    }
    for dir in [&include, &lib] {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            println!("cargo:rerun-if-changed={}", entry.path().display());
        }
    }
    // The arguments that decide the generated code, as bundled-vs-meson.sh
    // compares them with meson's compile command.
    for flag in ["-std=c++20", "-O3", "-DNDEBUG", "-D_FILE_OFFSET_BITS=64", "-fPIC", "-pthread"]
        .iter()
        .map(|s| s.to_string())
        .chain(lib_args)
    {
        writeln!(record, "flag {}", flag).unwrap();
    }
    // Emits rustc-link-lib=static=blitz, its search path, and (cpp) stdc++.
    build.compile("blitz");

    // libatomic_ops, static as in meson.build (`dependency('atomic_ops', static: true)`).
    let atomic_ops = atomic_ops_dir();
    match &atomic_ops {
        Some(dir) => {
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static=atomic_ops");
            writeln!(record, "link atomic_ops {}", dir.display()).unwrap();
        }
        None => panic!(
            "blitz-sys: libatomic_ops.a not found (Debian: apt-get install libatomic-ops-dev), \
             which the bundled libblitz links as meson does"
        ),
    }
    writeln!(record, "link stdc++").unwrap();
    fs::write(out_dir.join("bundled-build.txt"), record).unwrap();
    // Dependents' build scripts see DEP_BLITZ_BUNDLED=1 (and no LIB_DIR or RPATH: there is no .so).
    println!("cargo:bundled=1");
    println!(
        "cargo:warning=blitz-sys: libblitz compiled from {} (bundled, static; libatomic_ops from {})",
        lib.display(),
        atomic_ops.unwrap().display()
    );
    include
}

/// The directory of libatomic_ops.a: pkg-config's libdir for atomic_ops,
/// else where the C compiler finds the file.
#[cfg(feature = "bundled")]
fn atomic_ops_dir() -> Option<PathBuf> {
    if let Some(dir) = pkg_config(&["--variable=libdir", "atomic_ops"]).filter(|d| !d.is_empty()) {
        if Path::new(&dir).join("libatomic_ops.a").exists() {
            return Some(PathBuf::from(dir));
        }
    }
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(cc).arg("-print-file-name=libatomic_ops.a").output().ok()?;
    let file = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if out.status.success() && file.is_absolute() && file.exists() {
        return file.parent().map(Path::to_path_buf);
    }
    None
}

/// Finds the system library, links it, and exports where it is. Returns the include directory.
fn use_system_library(out_dir: &Path) -> Option<PathBuf> {
    let found = find_library();
    if let Some(dir) = &found.runtime_dir {
        // `cargo run`, `cargo test` and `cargo bench` of this crate and of
        // every crate that depends on it, directly or not, put the link
        // directories that lie inside cargo's target directory on the
        // run-time library path. A directory outside it (the checkout's
        // build/, BLITZ_LIB_DIR) is not: so the library is linked from
        // links to it in OUT_DIR, which is inside.
        match link_into(dir, &out_dir.join("lib")) {
            Ok(inside) => println!("cargo:rustc-link-search=native={}", inside.display()),
            Err(e) => println!("cargo:warning=blitz-sys: cannot link libblitz into OUT_DIR ({}): dependents need an rpath or LD_LIBRARY_PATH", e),
        }
    }
    for dir in &found.lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=blitz");
    if let Some(dir) = &found.runtime_dir {
        // Dependents' build scripts see it as DEP_BLITZ_LIB_DIR: a crate
        // that depends on blitz-sys adds it to the rpath of its binaries
        // (for running them outside cargo) with one line in its build.rs:
        //   println!("cargo:rustc-link-arg=-Wl,-rpath,{}", std::env::var("DEP_BLITZ_LIB_DIR").unwrap());
        // DEP_BLITZ_RPATH is that argument ready-made.
        println!("cargo:lib_dir={}", dir.display());
        println!("cargo:rpath=-Wl,-rpath,{}", dir.display());
        // This crate's own tests find the library at run time without LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    let header_note = match &found.include_dir {
        Some(dir) => format!("header {}", dir.join("blitz.h").display()),
        None => "no blitz.h found (set BLITZ_INCLUDE_DIR); the ABI mirror test will fail".to_string(),
    };
    println!("cargo:warning=blitz-sys: libblitz from {}; {}", found.how, header_note);
    found.include_dir
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=abi/header.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=BLITZ_LIB_DIR");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());

    // An explicit BLITZ_LIB_DIR wins over the default feature: how a
    // project (and this checkout's meson test) picks a given libblitz.so
    // without editing the features of a crate deep in its dependencies.
    // Without the feature, `cc` is not a dependency: the bundled build is not compiled in.
    let bundled = cfg!(feature = "bundled") && env_path("BLITZ_LIB_DIR").is_none();
    // The record of a bundled build goes with it (a stale one would pass for this build's).
    let _ = fs::remove_file(out_dir.join("bundled-build.txt"));
    #[cfg(feature = "bundled")]
    let include_dir = if bundled { Some(build_bundled(&out_dir)) } else { use_system_library(&out_dir) };
    #[cfg(not(feature = "bundled"))]
    let include_dir = {
        let _ = bundled;
        use_system_library(&out_dir)
    };
    if let Some(dir) = &include_dir {
        println!("cargo:include_dir={}", dir.display());
        println!("cargo:rerun-if-changed={}", dir.join("blitz.h").display());
    }

    let cross = env::var("TARGET").ok() != env::var("HOST").ok();
    let result = match (&include_dir, cross) {
        (_, true) => Err("cross-compiling: the C probe cannot run on the build machine".to_string()),
        (None, false) => Err("blitz.h not found (set BLITZ_INCLUDE_DIR)".to_string()),
        (Some(dir), false) => run_probe(dir, &out_dir),
    };
    let abi = match result {
        Ok(text) => text,
        Err(e) => {
            println!("cargo:warning=blitz-sys: ABI probe: {}", e);
            if !out_dir.join("blitz.h").exists() {
                fs::write(out_dir.join("blitz.h"), "").unwrap();
            }
            format!("error {}\n", e)
        }
    };
    fs::write(out_dir.join("c_abi.txt"), abi).unwrap();
}
