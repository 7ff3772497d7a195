/*
 * libblitz for Node.js: the functions index.js calls, and the module's
 * init. They check their arguments (args.c), build a call and submit it
 * (lifetime.c, whose opening comment says which thread does what and
 * what keeps each object alive).
 */
#include "addon.h"

/* ---- exported functions (called by index.js) ---- */


/* createPool(threads) -> handle */
static napi_value js_create_pool(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    env_data *ed = get_env_data(env);
    if (!ed || ed->torn_down) {
        napi_throw_error(env, "BLZ_ESHUTDOWN", "libblitz: the environment is shutting down");
        return NULL;
    }
    uint32_t threads;
    if (napi_get_value_uint32(env, argv[0], &threads) != napi_ok || threads > BLZ_MAX_THREADS) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "threads must be an integer from 0 to 65535");
        return NULL;
    }
    pool_ctx *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = threads;
    config.thread_name = "blz-node";
    blz_status s = blz_pool_create(&config, &p->pool);
    if (s != BLZ_OK) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        throw_status(env, s);
        return NULL;
    }
    p->threads = blz_pool_num_threads(p->pool);

    napi_value handle, name;
    if (napi_create_object(env, &handle) != napi_ok ||
        napi_create_string_utf8(env, "libblitz", NAPI_AUTO_LENGTH, &name) != napi_ok ||
        napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, p, tsfn_finalized, p, deliver,
                                        &p->tsfn) != napi_ok) {
        blz_pool_destroy(p->pool);
        pthread_mutex_destroy(&p->lock);
        free(p);
        throw_napi_failure(env, napi_generic_failure, "creating the pool's threadsafe function");
        return NULL;
    }
    p->tsfn_alive = true;
    p->refs = 1; /* the tsfn */
    /* Idle: the pool does not keep the loop alive until a call is in flight. */
    napi_unref_threadsafe_function(env, p->tsfn);
    if (napi_wrap(env, handle, p, pool_handle_finalize, NULL, NULL) != napi_ok) {
        /* The tsfn's finalizer drops its reference; destroy the pool first. */
        blz_pool_destroy(p->pool);
        p->pool = NULL;
        release_tsfn(p);
        throw_napi_failure(env, napi_generic_failure, "napi_wrap");
        return NULL;
    }
    p->refs++;
    p->handle_alive = true;
    napi_type_tag_object(env, handle, &POOL_TAG);
    p->ed = ed;
    p->next = ed->pools;
    if (ed->pools) ed->pools->prev = p;
    ed->pools = p;
    return handle;
}

/* threads(handle) -> number */
static napi_value js_pool_threads(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    pool_ctx *p = unwrap_pool(env, argv[0]);
    if (!p) return NULL;
    napi_value v;
    CHECK_NAPI(env, napi_create_uint32(env, p->threads, &v));
    return v;
}

/* run(handle, fn, arg, token) -> promise */
static napi_value js_run(napi_env env, napi_callback_info info) {
    GET_ARGS(4);
    pool_ctx *p = unwrap_pool(env, argv[0]);
    if (!p) return NULL;
    native_fn *f = unwrap_fn(env, argv[1]);
    if (!f) return NULL;
    if (f->kind != 0) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "run needs a NativeFunction of kind 'task'");
        return NULL;
    }
    js_bytes b;
    const js_bytes *arg;
    if (!read_arg(env, argv[2], &b, &arg)) return NULL;
    if (!accepting(p)) return rejected(env, BLZ_ESHUTDOWN);
    call_ctx *c = new_call(env, CALL_RUN);
    if (!c) return NULL;
    c->u.run.fn = f->fn.task;
    if (!take_arg(env, c, argv[2], arg, &c->u.run.arg)) {
        free_call(env, c);
        return NULL;
    }
    return submit(env, p, c, argv[0], argv[3]);
}

/* parallelFor(handle, begin, end, grain, fn, arg, token) -> promise */
static napi_value js_parallel_for(napi_env env, napi_callback_info info) {
    GET_ARGS(7);
    pool_ctx *p = unwrap_pool(env, argv[0]);
    if (!p) return NULL;
    size_t begin, end, grain;
    if (!get_index(env, argv[1], "begin", &begin) || !get_index(env, argv[2], "end", &end) ||
        !get_index(env, argv[3], "grain", &grain))
        return NULL;
    if (begin > end) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "begin must not be greater than end");
        return NULL;
    }
    native_fn *f = unwrap_fn(env, argv[4]);
    if (!f) return NULL;
    if (f->kind != 1) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "parallelFor needs a NativeFunction of kind 'range'");
        return NULL;
    }
    js_bytes b;
    const js_bytes *arg;
    if (!read_arg(env, argv[5], &b, &arg)) return NULL;
    if (!accepting(p)) return rejected(env, BLZ_ESHUTDOWN);
    call_ctx *c = new_call(env, CALL_FOR);
    if (!c) return NULL;
    c->u.loop.fn = f->fn.range;
    c->u.loop.begin = begin;
    c->u.loop.end = end;
    c->u.loop.grain = grain;
    if (!take_arg(env, c, argv[5], arg, &c->u.loop.arg)) {
        free_call(env, c);
        return NULL;
    }
    return submit(env, p, c, argv[0], argv[6]);
}


/* crc32(handle, buffers, token) -> promise of numbers */
static napi_value js_crc32(napi_env env, napi_callback_info info) {
    GET_ARGS(3);
    pool_ctx *p = unwrap_pool(env, argv[0]);
    if (!p) return NULL;
    bool is_array = false;
    if (napi_is_array(env, argv[1], &is_array) != napi_ok || !is_array) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "buffers must be an array");
        return NULL;
    }
    if (!accepting(p)) return rejected(env, BLZ_ESHUTDOWN);
    call_ctx *c = new_call(env, CALL_CRC32);
    if (!c) return NULL;
    size_t n = 0;
    c->u.crc.spans = read_buffers(env, argv[1], &c->mem, &n);
    c->u.crc.n = n;
    c->u.crc.out = c->u.crc.spans ? malloc((n ? n : 1) * sizeof *c->u.crc.out) : NULL;
    if (!c->u.crc.out) {
        if (c->u.crc.spans) throw_status(env, BLZ_ENOMEM);
        free_call(env, c);
        return NULL;
    }
    return submit(env, p, c, argv[0], argv[2]);
}

/* sort(handle, float64array, token) -> promise of the same array */
static napi_value js_sort(napi_env env, napi_callback_info info) {
    GET_ARGS(3);
    pool_ctx *p = unwrap_pool(env, argv[0]);
    if (!p) return NULL;
    js_bytes b;
    if (!read_js_bytes(env, argv[1], &b) || b.type != napi_float64_array) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "sort needs a Float64Array");
        return NULL;
    }
    if (!accepting(p)) return rejected(env, BLZ_ESHUTDOWN);
    call_ctx *c = new_call(env, CALL_SORT);
    if (!c) return NULL;
    byte_span a;
    if (!take_bytes(env, &c->mem, &b, true, &a) || !set_result(env, c, argv[1])) {
        free_call(env, c);
        return NULL;
    }
    /* Written back once the sort ran, also when aborted: a permutation. */
    if (!b.shared) {
        c->back = a;
        c->back_on_failure = true;
    }
    c->u.sort.a = (double *)(void *)a.data;
    c->u.sort.n = b.count;
    c->u.sort.tmp = malloc((b.count ? b.count : 1) * sizeof(double));
    if (!c->u.sort.tmp) {
        free_call(env, c);
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    return submit(env, p, c, argv[0], argv[2]);
}

/* map(handle, input, output, op, mul, add, grain, token) -> promise of output */
static napi_value js_map(napi_env env, napi_callback_info info) {
    GET_ARGS(8);
    pool_ctx *p = unwrap_pool(env, argv[0]);
    if (!p) return NULL;
    js_bytes in, out;
    if (!read_js_bytes(env, argv[1], &in) || !read_js_bytes(env, argv[2], &out) ||
        (in.type != napi_float64_array && in.type != napi_float32_array) || out.type != in.type) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE",
                              "map needs a Float64Array or Float32Array, and an output of the same type");
        return NULL;
    }
    if (out.count != in.count) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "map's output must have the input's length");
        return NULL;
    }
    int32_t op;
    double mul, add;
    size_t grain;
    if (napi_get_value_int32(env, argv[3], &op) != napi_ok || op < 0 || op >= BN_MAP_COUNT) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "unknown map operation");
        return NULL;
    }
    if (napi_get_value_double(env, argv[4], &mul) != napi_ok || napi_get_value_double(env, argv[5], &add) != napi_ok) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "mul and add must be numbers");
        return NULL;
    }
    if (!get_index(env, argv[6], "grain", &grain)) return NULL;
    if (!accepting(p)) return rejected(env, BLZ_ESHUTDOWN);
    call_ctx *c = new_call(env, CALL_MAP);
    if (!c) return NULL;
    /* Input and output are taken apart even when they are one array (or
     * overlap): each output element is then computed from the input as it
     * was at the call. A copied output is written back only on success. */
    byte_span in_span, out_span;
    if (!take_bytes(env, &c->mem, &in, true, &in_span) || !take_bytes(env, &c->mem, &out, false, &out_span) ||
        !set_result(env, c, argv[2])) {
        free_call(env, c);
        return NULL;
    }
    if (!out.shared) c->back = out_span;
    c->u.map.op = op;
    c->u.map.f32 = in.type == napi_float32_array;
    c->u.map.mul = mul;
    c->u.map.add = add;
    c->u.map.in = in_span.data;
    c->u.map.out = out_span.data;
    c->u.map.n = in.count;
    c->u.map.grain = grain;
    return submit(env, p, c, argv[0], argv[7]);
}

/* cancel(token): cancels the call's task; a settled call's token is unwrapped: no-op. */
static napi_value js_cancel(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    void *c = NULL;
    bool tagged = false;
    napi_valuetype t;
    /* The handle is valid while the token is wrapped: settle joins the
     * task and unwraps the token in one go, on this same thread. */
    if (napi_typeof(env, argv[0], &t) == napi_ok && t == napi_object &&
        napi_check_object_type_tag(env, argv[0], &TOKEN_TAG, &tagged) == napi_ok && tagged &&
        napi_unwrap(env, argv[0], &c) == napi_ok && c && ((call_ctx *)c)->task) {
        blz_task_cancel(((call_ctx *)c)->task);
    }
    return NULL;
}

static bool set_u64(napi_env env, napi_value obj, const char *name, uint64_t v) {
    napi_value n;
    return napi_create_double(env, (double)v, &n) == napi_ok && napi_set_named_property(env, obj, name, n) == napi_ok;
}

/* stats(handle) -> object (throws BLZ_ESHUTDOWN on a closed pool) */
static napi_value js_stats(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    pool_ctx *p = unwrap_pool(env, argv[0]);
    if (!p) return NULL;
    if (!p->pool || p->closing) {
        throw_status(env, BLZ_ESHUTDOWN);
        return NULL;
    }
    blz_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    blz_status s = blz_pool_stats(p->pool, &st);
    if (s != BLZ_OK) {
        throw_status(env, s);
        return NULL;
    }
    napi_value obj;
    CHECK_NAPI(env, napi_create_object(env, &obj));
    if (!set_u64(env, obj, "threads", st.num_threads) || !set_u64(env, obj, "sleepingNow", st.sleeping_now) ||
        !set_u64(env, obj, "inactiveNow", st.inactive_now) ||
        !set_u64(env, obj, "jobsExecuted", st.jobs_executed) ||
        !set_u64(env, obj, "jobsInjected", st.jobs_injected) || !set_u64(env, obj, "steals", st.steals) ||
        !set_u64(env, obj, "sleeps", st.sleeps) || !set_u64(env, obj, "wakeups", st.wakeups) ||
        !set_u64(env, obj, "spuriousWakeups", st.spurious_wakeups) ||
        !set_u64(env, obj, "sleepAborts", st.sleep_aborts) || !set_u64(env, obj, "tasksFailed", st.tasks_failed) ||
        !set_u64(env, obj, "inFlight", p->in_flight))
        return NULL;
    return obj;
}

/* close(handle) -> promise, the same one on every call */
static napi_value js_close(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    pool_ctx *p = unwrap_pool(env, argv[0]);
    if (!p) return NULL;
    napi_value promise;
    if (p->close_promise) {
        CHECK_NAPI(env, napi_get_reference_value(env, p->close_promise, &promise));
        return promise;
    }
    CHECK_NAPI(env, napi_create_promise(env, &p->close_deferred, &promise));
    CHECK_NAPI(env, napi_create_reference(env, promise, 1, &p->close_promise));
    p->closing = true;
    if (p->in_flight == 0) finish_close(env, p);
    /* else deliver finishes it when the last call settles */
    return promise;
}

static void fn_finalize(napi_env env, void *data, void *hint) {
    (void)env;
    (void)hint;
    free(data);
}

static napi_value wrap_fn(napi_env env, native_fn *f) {
    napi_value handle;
    if (napi_create_object(env, &handle) != napi_ok || napi_wrap(env, handle, f, fn_finalize, NULL, NULL) != napi_ok) {
        free(f);
        throw_napi_failure(env, napi_generic_failure, "wrapping a NativeFunction");
        return NULL;
    }
    napi_type_tag_object(env, handle, &FN_TAG);
    return handle;
}

static bool get_string(napi_env env, napi_value v, char *buf, size_t size, const char *what) {
    size_t len = 0;
    if (napi_get_value_string_utf8(env, v, buf, size, &len) != napi_ok) {
        char message[96];
        snprintf(message, sizeof message, "%s must be a string", what);
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
        return false;
    }
    if (len + 1 >= size || strlen(buf) != len) {
        char message[96];
        snprintf(message, sizeof message, "%s is too long or contains a NUL character", what);
        napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", message);
        return false;
    }
    return true;
}

/* loadFunction(path, symbol, kind) -> fn handle; throws Error ERR_DLOPEN_FAILED / ERR_BLITZ_SYMBOL. */
static napi_value js_load_function(napi_env env, napi_callback_info info) {
    GET_ARGS(3);
    char path[4096], symbol[512];
    int32_t kind;
    if (!get_string(env, argv[0], path, sizeof path, "library") ||
        !get_string(env, argv[1], symbol, sizeof symbol, "symbol"))
        return NULL;
    if (napi_get_value_int32(env, argv[2], &kind) != napi_ok || (kind != 0 && kind != 1)) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", "kind must be 'task' or 'range'");
        return NULL;
    }
    /* Never closed: a queued task may hold the pointer (see the top). */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        char message[4200];
        const char *why = dlerror();
        snprintf(message, sizeof message, "cannot load %s: %s", path, why ? why : "unknown error");
        napi_throw_error(env, "ERR_DLOPEN_FAILED", message);
        return NULL;
    }
    dlerror();
    void *sym = dlsym(lib, symbol);
    if (!sym) {
        char message[4700];
        const char *why = dlerror();
        snprintf(message, sizeof message, "no function %s in %s%s%s", symbol, path, why ? ": " : "", why ? why : "");
        napi_throw_error(env, "ERR_BLITZ_SYMBOL", message);
        return NULL;
    }
    native_fn *f = calloc(1, sizeof *f);
    if (!f) {
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    f->kind = kind;
    /* POSIX guarantees that a function's dlsym address converts back. */
    if (kind == 0) {
        *(void **)(&f->fn.task) = sym;
    } else {
        *(void **)(&f->fn.range) = sym;
    }
    return wrap_fn(env, f);
}

static void noop_task(void *arg) { (void)arg; }

/* builtinFunction(name) -> fn handle: 'noop', the empty task of the latency benchmark. */
static napi_value js_builtin_function(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    char name[32];
    if (!get_string(env, argv[0], name, sizeof name, "name")) return NULL;
    if (strcmp(name, "noop") != 0) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "no such built-in function");
        return NULL;
    }
    native_fn *f = calloc(1, sizeof *f);
    if (!f) {
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    f->kind = 0;
    f->fn.task = noop_task;
    return wrap_fn(env, f);
}

/* crc32Sync(buffer) -> number, on the calling thread. */
static napi_value js_crc32_sync(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    js_bytes b;
    if (!get_bytes(env, argv[0], &b, "data")) return NULL;
    /* On this thread, with no JavaScript running: the memory cannot change. */
    napi_value v;
    CHECK_NAPI(env, napi_create_uint32(env, bn_crc32(0, b.data, b.len), &v));
    return v;
}

/* libraryVersion() -> number (blz_version_number of the loaded libblitz) */
static napi_value js_library_version(napi_env env, napi_callback_info info) {
    (void)info;
    napi_value v;
    CHECK_NAPI(env, napi_create_uint32(env, blz_version_number(), &v));
    return v;
}

/* statusName(code) -> string */
static napi_value js_status_name(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    int32_t s;
    CHECK_NAPI(env, napi_get_value_int32(env, argv[0], &s));
    napi_value v;
    CHECK_NAPI(env, status_name(env, s, &v));
    return v;
}

/* ---- module init: once per env ---- */

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
    if (blz_version_number() < 200) {
        napi_throw_error(env, "ERR_BLITZ_VERSION", "libblitz: the loaded libblitz.so is older than 0.2");
        return NULL;
    }
    bn_crc32_init();
    env_box *box = calloc(1, sizeof *box);
    if (!box) {
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    box->env = env;
    if (napi_set_instance_data(env, &box->data, env_data_finalize, NULL) != napi_ok) {
        free(box);
        throw_napi_failure(env, napi_generic_failure, "napi_set_instance_data");
        return NULL;
    }
    /* Registered before any pool's tsfn exists: hooks run last-in first-out,
     * so at teardown this runs after the tsfns' hooks (which only mark them
     * closing) and before Node deletes them or the env. */
    CHECK_NAPI(env, napi_add_env_cleanup_hook(env, env_cleanup, &box->data));

    static const struct { const char *name; napi_callback cb; } fns[] = {
        {"createPool", js_create_pool},
        {"poolThreads", js_pool_threads},
        {"run", js_run},
        {"parallelFor", js_parallel_for},
        {"crc32", js_crc32},
        {"sort", js_sort},
        {"map", js_map},
        {"cancel", js_cancel},
        {"stats", js_stats},
        {"close", js_close},
        {"loadFunction", js_load_function},
        {"builtinFunction", js_builtin_function},
        {"crc32Sync", js_crc32_sync},
        {"libraryVersion", js_library_version},
        {"statusName", js_status_name},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; ++i) {
        napi_value fn;
        CHECK_NAPI(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &fn));
        CHECK_NAPI(env, napi_set_named_property(env, exports, fns[i].name, fn));
    }
    return exports;
}

