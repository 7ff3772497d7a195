//! Proves that src/lib.rs mirrors include/blitz.h exactly.
//!
//! Names come from the header itself (abi/header.rs parses it), values and
//! layouts from the C compiler (build.rs compiles a probe generated from the
//! header and records its output in $OUT_DIR/c_abi.txt), and the Rust side
//! from the declarations, through tables whose entries are type-checked
//! against them at compile time. Every test fails when the header gains a
//! declaration that the Rust side lacks, or the other way round.
#![allow(clippy::unnecessary_cast)]

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::mem::{align_of, size_of, MaybeUninit};
use std::os::raw::{c_char, c_int, c_void};

use blitz_sys::*;

#[path = "../abi/header.rs"]
mod header;

const C_ABI: &str = include_str!(concat!(env!("OUT_DIR"), "/c_abi.txt"));
const HEADER: &str = include_str!(concat!(env!("OUT_DIR"), "/blitz.h"));

/// The probe's output, by kind.
#[derive(Default)]
struct CAbi {
    /// Value, whether the C type is unsigned, its size.
    consts: BTreeMap<String, (i64, bool, usize)>,
    opaque: Vec<String>,
    scalars: BTreeMap<String, (usize, usize, bool)>,
    callbacks: BTreeMap<String, usize>,
    structs: BTreeMap<String, (usize, usize)>,
    fields: BTreeMap<String, Vec<(String, usize, usize)>>,
}

fn c_abi() -> CAbi {
    let mut abi = CAbi::default();
    for line in C_ABI.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| -> usize { w[i].parse().unwrap() };
        match w.first().copied() {
            Some("error") => panic!("the C ABI probe did not run: {}", line),
            Some("const") => {
                abi.consts.insert(w[1].to_string(), (w[2].parse().unwrap(), w[3] == "1", n(4)));
            }
            Some("opaque") => abi.opaque.push(w[1].to_string()),
            Some("scalar") => {
                abi.scalars.insert(w[1].to_string(), (n(2), n(3), w[4] == "1"));
            }
            Some("callback") => {
                abi.callbacks.insert(w[1].to_string(), n(2));
            }
            Some("struct") => {
                abi.structs.insert(w[1].to_string(), (n(2), n(3)));
            }
            Some("field") => abi.fields.entry(w[1].to_string()).or_default().push((w[2].to_string(), n(3), n(4))),
            _ => panic!("unexpected probe line {:?}", line),
        }
    }
    assert!(!abi.consts.is_empty(), "the C ABI probe printed nothing");
    abi
}

fn parsed_header() -> header::Header {
    assert!(!HEADER.is_empty(), "build.rs found no blitz.h");
    header::parse(HEADER)
}

/// The C spelling of a Rust type written in these tables, in header.rs's
/// canonical form: "*const blz_pool_config" → "const blz_pool_config*".
fn rust_to_c(rust: &str) -> String {
    let mut s: String = rust.chars().filter(|c| !c.is_whitespace()).collect();
    // An array: "[u64; 2]" is "uint64_t[2]".
    if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let (element, len) = inner.rsplit_once(';').expect("an array type without its length");
        return format!("{}[{}]", rust_to_c(element), len);
    }
    let mut depth = 0;
    let mut is_const = false;
    loop {
        if let Some(rest) = s.strip_prefix("*mut") {
            assert!(!is_const, "a const pointer to a pointer has no canonical form: {}", rust);
            s = rest.to_string();
        } else if let Some(rest) = s.strip_prefix("*const") {
            assert!(!is_const, "a const pointer to a pointer has no canonical form: {}", rust);
            is_const = true;
            s = rest.to_string();
        } else {
            break;
        }
        depth += 1;
    }
    let base = match s.as_str() {
        "u32" => "uint32_t",
        "i32" => "int32_t",
        "u64" => "uint64_t",
        "usize" => "size_t",
        "c_void" => "void",
        "c_char" => "char",
        "c_int" => "int",
        "()" | "" => "void",
        other => other,
    };
    format!("{}{}{}", if is_const { "const " } else { "" }, base, "*".repeat(depth))
}

// ---- The Rust side, as tables checked against the declarations by the compiler.

/// A Rust constant: its value, and its type's signedness and size.
#[derive(Clone, Debug, PartialEq)]
struct RustConst {
    name: String,
    value: i64,
    unsigned: bool,
    size: usize,
}

/// The integer types a constant may have, and whether each is unsigned.
trait Int: Copy {
    const UNSIGNED: bool;
}
impl Int for i32 {
    const UNSIGNED: bool = false;
}
impl Int for u32 {
    const UNSIGNED: bool = true;
}
impl Int for i64 {
    const UNSIGNED: bool = false;
}
impl Int for u64 {
    const UNSIGNED: bool = true;
}

fn int_type<T: Int>(_: T) -> (bool, usize) {
    (T::UNSIGNED, size_of::<T>())
}

macro_rules! constants {
    ($($name:ident),* $(,)?) => {
        vec![$({
            let (unsigned, size) = int_type($name);
            RustConst { name: stringify!($name).to_string(), value: $name as i64, unsigned, size }
        }),*]
    };
}

fn rust_constants() -> Vec<RustConst> {
    constants![
        BLZ_VERSION_MAJOR,
        BLZ_VERSION_MINOR,
        BLZ_VERSION_PATCH,
        BLZ_VERSION_NUMBER,
        BLZ_MAX_THREADS,
        BLZ_FORK_LAYOUT_VERSION,
        BLZ_OK,
        BLZ_EINVAL,
        BLZ_ENOMEM,
        BLZ_ETHREAD,
        BLZ_ESHUTDOWN,
        BLZ_EDEADLK,
        BLZ_ETASK,
        BLZ_EFORK,
        BLZ_ETIMEDOUT,
        BLZ_ECANCELED,
        BLZ_GROUP_CANCEL_ON_FAILURE,
        BLZ_SPAWN_HIGH_PRIORITY,
        BLZ_SPAWN_DONE_AFTER_FINISH,
        BLZ_SPAWN_CANCEL_ON_FAILURE,
        BLZ_SPAWN_AFTER_ANY_END,
        BLZ_SIZE_FROM_ENVIRONMENT,
        BLZ_SIZE_FROM_AFFINITY,
        BLZ_SIZE_FROM_CPU_QUOTA,
    ]
}

/// A struct as Rust lays it out. Measured without offset_of! (stable only
/// from Rust 1.77): the address of each field of an uninitialised value,
/// minus the address of the value.
#[derive(Clone, Debug)]
struct Layout {
    name: String,
    size: usize,
    align: usize,
    fields: Vec<FieldLayout>,
}

#[derive(Clone, Debug)]
struct FieldLayout {
    name: String,
    /// The field's Rust type in canonical C spelling (see rust_to_c).
    c_type: String,
    offset: usize,
    size: usize,
}

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

macro_rules! layout {
    ($t:ident { $($f:ident : $ty:ty),* $(,)? }) => {{
        // Compiles only if the list names every field of the Rust struct,
        // each with its exact type.
        #[allow(dead_code)]
        fn exhaustive(v: &$t) {
            let $t { $($f: _),* } = v;
            $(let _: &$ty = &v.$f;)*
        }
        let value = MaybeUninit::<$t>::uninit();
        let base = value.as_ptr();
        let fields = vec![$({
            // SAFETY: addr_of! computes the address without reading the uninitialised field.
            let field = unsafe { std::ptr::addr_of!((*base).$f) };
            FieldLayout {
                name: stringify!($f).trim_start_matches("r#").to_string(),  // r#fn is C's fn
                c_type: rust_to_c(stringify!($ty)),
                offset: field as usize - base as usize,
                size: size_of_pointee(field),
            }
        }),*];
        Layout { name: stringify!($t).to_string(), size: size_of::<$t>(), align: align_of::<$t>(), fields }
    }};
}

fn rust_structs() -> Vec<Layout> {
    vec![
        layout!(blz_pool_config {
            struct_size: u32,
            num_threads: u32,
            stack_size: usize,
            thread_name: *const c_char,
            on_thread_start: blz_thread_fn,
            on_thread_stop: blz_thread_fn,
            user: *mut c_void,
            cpu_list: *const c_char,
            spawn_thread: blz_spawn_thread_fn,
            spawn_user: *mut c_void,
        }),
        layout!(blz_stats {
            struct_size: u32,
            num_threads: u32,
            sleeping_now: u32,
            inactive_now: u32,
            jobs_executed: u64,
            jobs_injected: u64,
            steals: u64,
            sleeps: u64,
            wakeups: u64,
            spurious_wakeups: u64,
            sleep_aborts: u64,
            tasks_failed: u64,
            run_ns: u64,
            search_ns: u64,
            sleep_ns: u64,
        }),
        layout!(blz_spawn_options {
            struct_size: u32,
            flags: u32,
            group: *mut blz_group,
            on_done: blz_done_fn,
            done_arg: *mut c_void,
            after_tasks: *const *mut blz_task,
            num_after_tasks: usize,
            after_events: *const *mut blz_event,
            num_after_events: usize,
            after_groups: *const *mut blz_group,
            num_after_groups: usize,
        }),
        layout!(blz_fork_frame { r#fn: blz_fn, arg: *mut c_void, job: [uintptr_t; 8] }),
        layout!(blz_fork_stack {
            pool: *const blz_pool,
            frames: *mut *mut blz_fork_frame,
            depth: u32,
            capacity: u32,
            promoted: u32,
            reserved0: u32,
            failures: *mut u32,
            jobs_executed: u64,
            reserved1: [u64; 2],
            requests: u32,
            reserved2: [u32; 15],
        }),
        layout!(blz_default_size_info {
            struct_size: u32,
            num_threads: u32,
            source: u32,
            environment: u32,
            affinity_cpus: u32,
            quota_cpus: u32,
        }),
    ]
}

// ---- The comparisons. Each lists every difference it finds, so that a
// failure names all of them and the checks themselves can be tested.

/// Besides the value, a constant's type: as wide as in C, and unsigned
/// where C's is (`1u`: a flag for a `uint32_t` field must be a `u32` in
/// Rust too, not an `i32` that needs a cast). A C `int` constant that is
/// never negative may be a `u32` (the version numbers, compared with
/// `blz_version_number()`'s `uint32_t`); a negative one cannot, as its
/// value would differ.
fn constant_mismatches(rust: &[RustConst], h: &header::Header, abi: &CAbi) -> Vec<String> {
    let mut out = Vec::new();
    let rust_names: Vec<String> = rust.iter().map(|c| c.name.clone()).collect();
    if sorted(&rust_names) != sorted(&h.constants) {
        out.push(format!("constants: Rust has {:?}, blitz.h has {:?}", sorted(&rust_names), sorted(&h.constants)));
    }
    let int = |unsigned: bool, size: usize| format!("{}{}", if unsigned { "u" } else { "i" }, size * 8);
    for r in rust {
        let &(value, unsigned, size) = match abi.consts.get(&r.name) {
            Some(c) => c,
            None => {
                out.push(format!("{}: not printed by the C probe", r.name));
                continue;
            }
        };
        if r.value != value {
            out.push(format!("{}: {} in Rust, {} in C", r.name, r.value, value));
        }
        if r.size != size || (unsigned && !r.unsigned) {
            out.push(format!(
                "{}: type {} in Rust, {} in C",
                r.name,
                int(r.unsigned, r.size),
                if unsigned { format!("unsigned of {} bytes", size) } else { format!("signed of {} bytes", size) }
            ));
        }
    }
    out
}

fn struct_mismatches(rust: &[Layout], h: &header::Header, abi: &CAbi) -> Vec<String> {
    let mut out = Vec::new();
    let header_names: Vec<String> = h.structs.iter().map(|(n, _)| n.clone()).collect();
    let rust_names: Vec<String> = rust.iter().map(|l| l.name.clone()).collect();
    if sorted(&rust_names) != sorted(&header_names) {
        out.push(format!("structs: Rust has {:?}, blitz.h has {:?}", sorted(&rust_names), sorted(&header_names)));
    }
    for layout in rust {
        let name = &layout.name;
        let (c_size, c_align) = match abi.structs.get(name) {
            Some(&size_align) => size_align,
            None => {
                out.push(format!("{}: not in blitz.h", name));
                continue;
            }
        };
        if (layout.size, layout.align) != (c_size, c_align) {
            out.push(format!(
                "{}: size {} align {} in Rust, size {} align {} in C",
                name, layout.size, layout.align, c_size, c_align
            ));
        }
        let header_fields = &h.structs.iter().find(|(n, _)| n == name).unwrap().1;
        let rust_fields: Vec<(&str, &str)> = layout.fields.iter().map(|f| (&*f.name, &*f.c_type)).collect();
        let c_fields: Vec<(&str, &str)> = header_fields.iter().map(|f| (&*f.name, &*f.ty)).collect();
        if rust_fields != c_fields {
            out.push(format!("{}: fields (name, type) {:?} in Rust, {:?} in blitz.h", name, rust_fields, c_fields));
        }
        let c_layout = &abi.fields[name];
        for (f, (c_name, c_offset, c_size)) in layout.fields.iter().zip(c_layout) {
            if (&f.name, f.offset, f.size) != (c_name, *c_offset, *c_size) {
                out.push(format!(
                    "{}.{}: offset {} size {} in Rust; C has {} at offset {} size {}",
                    name, f.name, f.offset, f.size, c_name, c_offset, c_size
                ));
            }
        }
    }
    out
}

fn assert_none(mismatches: Vec<String>) {
    assert!(mismatches.is_empty(), "the Rust mirror differs from blitz.h:\n{}", mismatches.join("\n"));
}

macro_rules! opaque {
    ($($t:ident),* $(,)?) => {{
        $(
            // A handle type is used only behind pointers, and has no size of its own.
            let _: *mut $t = std::ptr::null_mut();
            assert_eq!(size_of::<$t>(), 0, "{} is not an opaque handle", stringify!($t));
        )*
        vec![$(stringify!($t).to_string()),*]
    }};
}

macro_rules! scalars {
    ($($name:ident : $t:ty),* $(,)?) => {{
        $(
            #[allow(dead_code)]
            fn $name(x: $name) -> $t { x }  // compiles only if the alias is exactly $t
        )*
        vec![$((stringify!($name).to_string(), rust_to_c(stringify!($t)), size_of::<$t>(), align_of::<$t>(), (0 as $t).checked_sub(1).is_some())),*]
    }};
}

/// A prototype in canonical C spelling.
type Sig = (String, String, Vec<String>);

macro_rules! callbacks {
    ($($name:ident : fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {{
        $(
            #[allow(dead_code)]
            fn $name(f: $name) -> Option<unsafe extern "C" fn($($arg),*) $(-> $ret)?> { f }
        )*
        vec![$((
            stringify!($name).to_string(),
            rust_to_c(stringify!($($ret)?)),
            vec![$(rust_to_c(stringify!($arg))),*],
            size_of::<$name>(),
        )),*]
    }};
}

macro_rules! functions {
    ($($name:ident : fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {{
        $(
            // Compiles only if the extern declaration has exactly this type.
            let _: unsafe extern "C" fn($($arg),*) $(-> $ret)? = $name;
        )*
        vec![$((stringify!($name).to_string(), rust_to_c(stringify!($($ret)?)), vec![$(rust_to_c(stringify!($arg))),*])),*]
    }};
}

fn rust_functions() -> Vec<Sig> {
    functions! {
        blz_version_number: fn() -> u32;
        blz_status_string: fn(blz_status) -> *const c_char;
        blz_pool_config_init: fn(*mut blz_pool_config);
        blz_pool_create: fn(*const blz_pool_config, *mut *mut blz_pool) -> blz_status;
        blz_pool_destroy: fn(*mut blz_pool) -> blz_status;
        blz_pool_num_threads: fn(*const blz_pool) -> u32;
        blz_worker_index: fn(*const blz_pool) -> i32;
        blz_pool_stats: fn(*const blz_pool, *mut blz_stats) -> blz_status;
        blz_spawn: fn(*mut blz_pool, blz_fn, *mut c_void, *mut *mut blz_task) -> blz_status;
        blz_join: fn(*mut blz_task) -> blz_status;
        blz_fork_join: fn(*mut blz_pool, blz_fn, *mut c_void, blz_fn, *mut c_void) -> blz_status;
        blz_call: fn(*mut blz_pool, blz_fn, *mut c_void) -> blz_status;
        blz_parallel_for: fn(*mut blz_pool, usize, usize, usize, blz_range_fn, *mut c_void) -> blz_status;
        blz_group_create: fn(*mut blz_pool, *mut *mut blz_group) -> blz_status;
        blz_group_spawn: fn(*mut blz_group, blz_fn, *mut c_void) -> blz_status;
        blz_group_wait: fn(*mut blz_group) -> blz_status;
        blz_group_destroy: fn(*mut blz_group) -> blz_status;
        blz_spawn_options_init: fn(*mut blz_spawn_options);
        blz_spawn_ex: fn(*mut blz_pool, blz_fn, *mut c_void, *const blz_spawn_options, *mut *mut blz_task) -> blz_status;
        blz_task_wait_for: fn(*mut blz_task, u64) -> blz_status;
        blz_task_detach: fn(*mut blz_task) -> blz_status;
        blz_task_cancel: fn(*mut blz_task) -> blz_status;
        blz_event_create: fn(*mut *mut blz_event) -> blz_status;
        blz_event_set: fn(*mut blz_event, blz_status) -> blz_status;
        blz_event_wait_for: fn(*mut blz_event, u64) -> blz_status;
        blz_event_destroy: fn(*mut blz_event) -> blz_status;
        blz_task_finish_later: fn(*mut *mut blz_event) -> blz_status;
        blz_isolate: fn(*mut blz_pool, blz_fn, *mut c_void) -> blz_status;
        blz_default_size: fn(*mut blz_default_size_info) -> blz_status;
        blz_pool_shared: fn(*const blz_pool_config, *mut *mut blz_pool) -> blz_status;
        blz_group_create_ex: fn(*mut blz_pool, u32, *mut *mut blz_group) -> blz_status;
        blz_group_wait_for: fn(*mut blz_group, u64) -> blz_status;
        blz_group_cancel: fn(*mut blz_group) -> blz_status;
        blz_group_cancelled: fn(*const blz_group) -> i32;
        blz_cancelled: fn() -> i32;
        blz_fail: fn();
        blz_broadcast: fn(*mut blz_pool, blz_thread_fn, *mut c_void) -> blz_status;
        blz_pool_release: fn(*mut blz_pool, blz_done_fn, *mut c_void) -> blz_status;
        blz_pool_set_max_active: fn(*mut blz_pool, u32) -> blz_status;
        blz_worker_stats: fn(*const blz_pool, u32, *mut blz_stats) -> blz_status;
        blz_pool_trace_start: fn(*mut blz_pool, *const c_char) -> blz_status;
        blz_pool_trace_stop: fn(*mut blz_pool) -> blz_status;
        blz_fork_push_v1: fn(*mut blz_fork_stack, *mut blz_fork_frame) -> c_int;
        blz_fork_join_v1: fn(*mut blz_fork_stack, *mut blz_fork_frame) -> c_int;
        blz_fork_failed_v1: fn(*mut blz_fork_stack, u32);
        blz_fork_stack_slot_v1: fn() -> *mut *mut blz_fork_stack;
    }
}

/// A variable of the header (the inline fork path's thread-local pointer)
/// cannot be declared in stable Rust: each must be reachable through its
/// slot function, which returns its address (`x_vN` through `x_slot_vN`).
fn variable_mismatches(functions: &[Sig], h: &header::Header) -> Vec<String> {
    let mut out = Vec::new();
    for (name, ty) in &h.variables {
        let slot = match name.rsplit_once("_v") {
            Some((stem, version)) => format!("{}_slot_v{}", stem, version),
            None => format!("{}_slot", name),
        };
        let expected = (slot.clone(), format!("{}*", ty), Vec::<String>::new());
        if !functions.contains(&expected) {
            out.push(format!("{}: no slot function {:?} declared in Rust", name, expected));
        }
    }
    out
}

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

// ---- The tests.

#[test]
fn every_constant_has_the_c_value() {
    let (abi, h) = (c_abi(), parsed_header());
    assert_eq!(h.constants.len(), abi.consts.len(), "the probe printed every constant of the header");
    assert_none(constant_mismatches(&rust_constants(), &h, &abi));
    // The probe tells C's types apart: `1u` is an unsigned int, an enum value an int.
    assert_eq!(abi.consts["BLZ_GROUP_CANCEL_ON_FAILURE"], (1, true, 4));
    assert_eq!(abi.consts["BLZ_ECANCELED"], (-9, false, 4));
}

#[test]
fn every_struct_has_the_c_layout() {
    let (abi, h) = (c_abi(), parsed_header());
    let rust = rust_structs();
    assert_none(struct_mismatches(&rust, &h, &abi));
    for l in &rust {
        println!("{}: size {}, align {}, fields {:?}", l.name, l.size, l.align, l.fields);
    }
}

/// The checks above can fail: a Rust struct with one field widened, laid
/// out by the compiler and measured as the mirror is, is caught, and so are
/// other mistakes written into the measured tables.
#[test]
fn a_wrong_layout_is_caught() {
    /// Declares a struct and measures it as `layout!` measures the mirror.
    macro_rules! declared {
        (#[$repr:meta] $t:ident { $($f:ident : $ty:ty),* $(,)? }) => {{
            #[$repr]
            #[allow(non_camel_case_types, dead_code)]
            struct $t { $($f: $ty),* }
            layout!($t { $($f: $ty),* })
        }};
    }
    let (abi, h) = (c_abi(), parsed_header());
    let mut rust = rust_structs();
    rust[0] = declared!(#[repr(C)] blz_pool_config {
        struct_size: u32,
        num_threads: u64,
        stack_size: usize,
        thread_name: *const c_char,
        on_thread_start: blz_thread_fn,
        on_thread_stop: blz_thread_fn,
        user: *mut c_void,
        cpu_list: *const c_char,
        spawn_thread: blz_spawn_thread_fn,
        spawn_user: *mut c_void,
    });
    rust[1].align *= 2;
    let found = struct_mismatches(&rust, &h, &abi);
    println!("caught:\n{}", found.join("\n"));
    let has = |text: &str| found.iter().any(|m| m.contains(text));
    // num_threads grew and every later field moved.
    for field in ["num_threads", "stack_size", "thread_name", "on_thread_start", "on_thread_stop", "user"] {
        assert!(has(&format!("blz_pool_config.{}: offset", field)), "{}: {:#?}", field, found);
    }
    assert!(has("(\"num_threads\", \"uint64_t\")"), "the field's type: {:#?}", found);
    assert!(has("blz_pool_config: size"), "{:#?}", found);
    assert!(has("blz_stats: size"), "the alignment: {:#?}", found);
    assert!(!has("blz_stats.") && !has("blz_pool_config.struct_size"), "only what differs: {:#?}", found);

    // A field missing, another renamed, a struct left out.
    let mut rust = rust_structs();
    rust[1].fields.pop();
    rust[1].fields[0].name = "size".to_string();
    let found = struct_mismatches(&rust, &h, &abi);
    assert!(found.iter().any(|m| m.starts_with("blz_stats: fields")), "{:#?}", found);
    assert!(
        found.iter().any(|m| m.starts_with("blz_stats.size: offset 0 size 4 in Rust; C has struct_size")),
        "{:#?}",
        found
    );
    let found = struct_mismatches(&rust_structs()[..1], &h, &abi);
    assert!(found.iter().any(|m| m.starts_with("structs: Rust has")), "{:#?}", found);

    // A function-pointer field of another callback type has the same size
    // and offset: only the type names tell them apart.
    let mut rust = rust_structs();
    rust[2] = declared!(#[repr(C)] blz_spawn_options {
        struct_size: u32,
        flags: u32,
        group: *mut blz_group,
        on_done: blz_fn,
        done_arg: *mut c_void,
        after_tasks: *const *mut blz_task,
        num_after_tasks: usize,
        after_events: *const *mut blz_event,
        num_after_events: usize,
        after_groups: *const *mut blz_group,
        num_after_groups: usize,
    });
    let found = struct_mismatches(&rust, &h, &abi);
    assert_eq!(found.len(), 1, "{:#?}", found);
    assert!(
        found[0].starts_with("blz_spawn_options: fields") && found[0].contains("(\"on_done\", \"blz_fn\")"),
        "{:#?}",
        found
    );
}

#[test]
fn a_wrong_constant_is_caught() {
    let (abi, h) = (c_abi(), parsed_header());
    let mut rust = rust_constants();
    let find = |rust: &mut Vec<RustConst>, name: &str| rust.iter().position(|c| c.name == name).unwrap();
    let etask = find(&mut rust, "BLZ_ETASK");
    rust[etask].value = -8;
    assert_eq!(constant_mismatches(&rust, &h, &abi), ["BLZ_ETASK: -8 in Rust, -6 in C"]);
    rust.retain(|c| c.name != "BLZ_EFORK");
    let found = constant_mismatches(&rust, &h, &abi);
    assert!(found.iter().any(|m| m.starts_with("constants: Rust has")), "{:#?}", found);

    // The right value in the wrong type: `1u` declared as an i32, or as a u64.
    let mut rust = rust_constants();
    let flag = find(&mut rust, "BLZ_GROUP_CANCEL_ON_FAILURE");
    rust[flag].unsigned = false;
    assert_eq!(
        constant_mismatches(&rust, &h, &abi),
        ["BLZ_GROUP_CANCEL_ON_FAILURE: type i32 in Rust, unsigned of 4 bytes in C"]
    );
    rust[flag].unsigned = true;
    rust[flag].size = 8;
    assert_eq!(
        constant_mismatches(&rust, &h, &abi),
        ["BLZ_GROUP_CANCEL_ON_FAILURE: type u64 in Rust, unsigned of 4 bytes in C"]
    );
    // A non-negative C int may be a u32 in Rust, but not a wider type.
    let mut rust = rust_constants();
    let major = find(&mut rust, "BLZ_VERSION_MAJOR");
    assert!(rust[major].unsigned);
    rust[major].size = 8;
    assert_eq!(constant_mismatches(&rust, &h, &abi), ["BLZ_VERSION_MAJOR: type u64 in Rust, signed of 4 bytes in C"]);
}

#[test]
fn handles_and_typedefs_match() {
    let abi = c_abi();
    let h = parsed_header();
    let handles = opaque![blz_pool, blz_task, blz_group, blz_event];
    assert_eq!(sorted(&handles), sorted(&h.opaque), "opaque handles");
    assert_eq!(sorted(&handles), sorted(&abi.opaque));

    let scalars = scalars![blz_status: i32];
    assert_eq!(scalars.len(), h.scalars.len(), "scalar typedefs: {:?}", h.scalars);
    for (name, c_type, size, align, signed) in &scalars {
        let header_type =
            &h.scalars.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{} not in blitz.h", name)).1;
        assert_eq!(c_type, header_type, "type of {}", name);
        assert_eq!((*size, *align, *signed), abi.scalars[name], "size, alignment, signedness of {}", name);
    }
}

#[test]
fn callback_types_match() {
    let abi = c_abi();
    let h = parsed_header();
    let rust = callbacks! {
        blz_fn: fn(*mut c_void);
        blz_range_fn: fn(*mut c_void, usize, usize);
        blz_thread_fn: fn(*mut c_void, u32);
        blz_done_fn: fn(*mut c_void, blz_status);
        blz_spawn_thread_fn: fn(*mut c_void, u32, blz_fn, *mut c_void) -> c_int;
    };
    assert_eq!(rust.len(), h.callbacks.len(), "callback typedefs: {:?}", h.callbacks);
    for (name, ret, params, size) in &rust {
        let c = h.callbacks.iter().find(|p| &p.name == name).unwrap_or_else(|| panic!("{} not in blitz.h", name));
        assert_eq!((ret, params), (&c.ret, &c.params), "signature of {}", name);
        // Option<extern fn> is a nullable pointer: the C function pointer's size.
        assert_eq!(*size, abi.callbacks[name], "size of {}", name);
        assert_eq!(*size, size_of::<*const c_void>());
    }
}

#[test]
fn every_prototype_matches() {
    let h = parsed_header();
    let rust = rust_functions();
    let header: Vec<Sig> = h.functions.iter().map(|p| (p.name.clone(), p.ret.clone(), p.params.clone())).collect();
    assert_eq!(sorted(&rust), sorted(&header), "functions: Rust vs blitz.h");
    assert_eq!(h.variables, [("blz_fork_stack_v1".to_string(), "blz_fork_stack*".to_string())]);
    assert_none(variable_mismatches(&rust, &h));
    println!("{} functions, {} constants, {} structs checked", rust.len(), h.constants.len(), h.structs.len());
}

#[test]
fn the_library_is_the_headers_version() {
    // SAFETY: both functions have no preconditions.
    let version = unsafe { blz_version_number() };
    assert_eq!(version, BLZ_VERSION_NUMBER, "libblitz.so and blitz.h disagree");
    let codes = [
        BLZ_OK,
        BLZ_EINVAL,
        BLZ_ENOMEM,
        BLZ_ETHREAD,
        BLZ_ESHUTDOWN,
        BLZ_EDEADLK,
        BLZ_ETASK,
        BLZ_EFORK,
        BLZ_ETIMEDOUT,
        BLZ_ECANCELED,
        42,
    ];
    for code in codes {
        let text = unsafe { CStr::from_ptr(blz_status_string(code)) }.to_str().unwrap();
        assert!(!text.is_empty());
        if code != 42 {
            assert!(text.starts_with("BLZ_"), "{}: {}", code, text);
        }
    }
}

#[test]
fn the_parser_reads_the_canonical_forms() {
    assert_eq!(
        header::split_named("const blz_pool_config *config"),
        ("const blz_pool_config*".to_string(), "config".to_string())
    );
    assert_eq!(header::split_named("blz_pool **out_pool"), ("blz_pool**".to_string(), "out_pool".to_string()));
    assert_eq!(rust_to_c("*const blz_pool_config"), "const blz_pool_config*");
    assert_eq!(rust_to_c("* mut * mut blz_pool"), "blz_pool**");
    assert_eq!(rust_to_c("*mut c_void"), "void*");
    assert_eq!(rust_to_c(""), "void");
}

#[test]
fn the_parser_reads_a_synthetic_header() {
    let text = r#"
        /** A doc comment with ; and { } inside. */
        #define BLZ_API __attribute__((visibility("default")))
        #define BLZ_NODISCARD
        #define BLZ_A 3 /* trailing */
        #define BLZ_B (BLZ_A * 2 + 1)
        #define BLZ_F(x) ((x) + 1)
        #define BLZ_U 1u
        #define BLZ_V (BLZ_U << 3)
        #ifdef __cplusplus
        extern "C" {
        #endif
        enum blz_e { BLZ_X = 0, BLZ_Y = -1 };
        typedef struct blz_h blz_h;
        typedef int32_t blz_s;
        typedef void (*blz_cb)(void *arg, size_t n);
        typedef struct blz_t { uint32_t a; /**< the a */ const char *b; } blz_t;
        typedef struct blz_o { blz_h *h; blz_cb cb; void *arg; } blz_o;
        BLZ_API BLZ_NODISCARD blz_s blz_f(const blz_t *t,
                                          blz_h **out);
        BLZ_API void blz_g(void);
        #ifdef __cplusplus
        }
        #endif
    "#;
    let h = header::parse(text);
    assert_eq!(h.constants, ["BLZ_A", "BLZ_B", "BLZ_U", "BLZ_V", "BLZ_X", "BLZ_Y"]);
    assert_eq!(h.opaque, ["blz_h"]);
    assert_eq!(h.scalars, [("blz_s".to_string(), "int32_t".to_string())]);
    let fields = |f: &[(&str, &str)]| -> Vec<header::Field> {
        f.iter().map(|(name, ty)| header::Field { name: name.to_string(), ty: ty.to_string() }).collect()
    };
    assert_eq!(
        h.structs,
        [
            ("blz_t".to_string(), fields(&[("a", "uint32_t"), ("b", "const char*")])),
            ("blz_o".to_string(), fields(&[("h", "blz_h*"), ("cb", "blz_cb"), ("arg", "void*")])),
        ]
    );
    assert_eq!(h.callbacks[0].params, ["void*", "size_t"]);
    assert_eq!(h.functions[0].name, "blz_f");
    assert_eq!(h.functions[0].ret, "blz_s");
    assert_eq!(h.functions[0].params, ["const blz_t*", "blz_h**"]);
    assert_eq!(h.functions[1].params, Vec::<String>::new());
}

/// A function pointer spelled out inside a struct has no canonical type the
/// mirror could compare (blitz.h names it by a typedef, as blz_spawn_options'
/// `blz_done_fn on_done` does): the parser refuses it rather than misread it.
#[test]
fn the_parser_refuses_what_it_cannot_compare() {
    let refused = |text: &'static str| {
        let result = std::panic::catch_unwind(|| header::parse(text));
        let payload = result.expect_err(text);
        payload.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let message = refused("typedef struct blz_o { void (*done)(void *arg, int32_t status); } blz_o;");
    assert!(message.contains("a field that is not a plain declaration"), "{}", message);
    let message = refused("typedef struct blz_o { uint32_t flags : 1; } blz_o;");
    assert!(message.contains("a bitfield"), "{}", message);
    let message = refused("static int blz_x;");
    assert!(message.contains("a declaration the mirror does not know"), "{}", message);
}
