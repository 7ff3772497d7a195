/*
 * Native functions (native.h): nativeFunction's dlopen/dlsym lookup and
 * the built-in noop task, each wrapped in a tagged JS handle (loop thread).
 *
 * Lifetimes. A handle owns its native_fn (freed by the handle's
 * finalizer); a call copies the function pointer into itself when it is
 * built, so it never needs the handle. A library once opened stays loaded
 * for the life of the process (never dlclose'd), as Node's own addons do,
 * so no pointer a queued or running task holds can dangle.
 */
#include "native.h"

#include <dlfcn.h>

static const napi_type_tag FN_TAG = {0x626c69747a2d6e6fULL, 0x64652d666e637431ULL};

native_fn *unwrap_fn(napi_env env, napi_value handle) {
    return unwrap_tagged(env, handle, &FN_TAG, "not a libblitz NativeFunction");
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

const js_export native_exports[] = {
    {"loadFunction", js_load_function},
    {"builtinFunction", js_builtin_function},
    {NULL, NULL},
};
