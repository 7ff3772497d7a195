/*
 * libblitz for Node.js: the module's init and its exports, the functions
 * index.js calls. The addon's files, by concern, each with a header:
 *   lifetime.c  pools, the submission of calls, their completion (on_done,
 *               the threadsafe function, settle), cancel, close and the
 *               env's teardown; its opening comment says which thread does
 *               what and what keeps each object alive, for every file
 *   calls.c     the pool methods (run, parallelFor, crc32, sort, map): each
 *               call's builder, its task on a worker and its result
 *   args.c      argument access: errors, byte arguments and the memory a
 *               call's kernels use, handles and indices
 *   native.c    native functions: dlopen lookups and the built-in noop
 *   kernels.c   the built-in C kernels (CRC-32, sort, map), no Node-API
 * The libuv comparison of bench/hash.mjs is not in the addon: it is a
 * module of its own, bench/uv_crc32.c.
 *
 * Lifetimes here: the init runs once per env (the main thread, each
 * worker_thread) on its loop thread, before any pool exists; it registers
 * the env's state and cleanup hook (lifetime_init_env) and owns nothing.
 */
#include "calls.h"
#include "lifetime.h"
#include "native.h"

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
    if (!lifetime_init_env(env)) return NULL;

    static const js_export module_exports[] = {
        {"libraryVersion", js_library_version},
        {"statusName", js_status_name},
        {NULL, NULL},
    };
    const js_export *const tables[] = {lifetime_exports, calls_exports, native_exports, module_exports};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; ++t) {
        for (const js_export *e = tables[t]; e->name; ++e) {
            napi_value fn;
            CHECK_NAPI(env, napi_create_function(env, e->name, NAPI_AUTO_LENGTH, e->cb, NULL, &fn));
            CHECK_NAPI(env, napi_set_named_property(env, exports, e->name, fn));
        }
    }
    return exports;
}

