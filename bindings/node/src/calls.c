/*
 * The calls (calls.h): for each pool method (run, parallelFor, crc32,
 * sort, map) the builder that checks its arguments, takes the memory its
 * kernel will use and submits it (lifetime.c), the task that runs the
 * kernel on a worker, and what its promise resolves to; crc32Sync, the
 * same CRC kernel on the calling thread.
 *
 * Lifetime rules kept here. A builder runs on the loop thread and takes
 * each byte argument right after reading it, before any JavaScript can
 * run again (take_bytes: a copy the call owns, or a held
 * SharedArrayBuffer), and hands the call to submit, which owns it from
 * then on, on every path. The task (call_task and the pieces it runs on
 * workers) touches only the call's kernel fields (call_args), its memory
 * and the fields lifetime.h gives to the worker side (ran, inner); it
 * makes no Node-API call. call_result and call_free_args run on the loop
 * thread once the call is settled.
 */
#include "lifetime.h"
#include "native.h"

/* ---- building a call (loop thread) ---- */

/* A new call of `kind` for p, or NULL: an exception pending, or *early a
 * rejected promise, p taking no new calls (checked before any copy is made). */
static call_ctx *new_call(napi_env env, pool_ctx *p, int kind, napi_value *early) {
    *early = NULL;
    if (!accepting(p)) {
        *early = rejected(env, BLZ_ESHUTDOWN);
        return NULL;
    }
    call_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    c->kind = kind;
    c->result_kind = RESULT_CRCS;
    return c;
}

/* What c's promise resolves to: v itself (held by a reference: no JS
 * property or array element stands between). false with an exception pending. */
static bool set_result(napi_env env, call_ctx *c, napi_value v) {
    napi_valuetype t;
    if (napi_typeof(env, v, &t) != napi_ok) return false;
    if (t == napi_undefined || t == napi_null) {
        c->result_kind = t == napi_undefined ? RESULT_UNDEFINED : RESULT_NULL;
        return true;
    }
    c->result_kind = RESULT_OBJECT;
    if (napi_create_reference(env, v, 1, &c->result) == napi_ok) return true;
    throw_napi_failure(env, napi_generic_failure, "holding the call's result");
    return false;
}

/*
 * The arg of run and parallelFor: b NULL for undefined or null (the
 * kernel gets NULL), else its bytes, read with no JavaScript run since,
 * taken for the call and written back when the kernel ran, failed or not
 * (a kernel may leave word of its failure there).
 */
static bool take_arg(napi_env env, call_ctx *c, napi_value arg, const js_bytes *b, void **data) {
    *data = NULL;
    if (b) {
        byte_span span;
        if (!take_bytes(env, &c->mem, b, true, &span)) return false;
        *data = span.data;
        if (!b->shared) {
            c->back = span;
            c->back_on_failure = true;
        }
    }
    return set_result(env, c, arg);
}

/* The arg's bytes, or NULL for undefined or null; false with a TypeError pending. */
static bool read_arg(napi_env env, napi_value arg, js_bytes *b, const js_bytes **out) {
    *out = NULL;
    if (is_undefined_or_null(env, arg)) return true;
    if (!get_bytes(env, arg, b, "arg")) return false;
    *out = b;
    return true;
}

/* ---- the task (a worker) ---- */

/* CRC pieces: one buffer per index. Long buffers are hashed in 256 KiB
 * steps with a cancellation check between steps, so that an abort (or an
 * env teardown) is not held up by one huge buffer. */
static void crc_pieces(void *arg, size_t lo, size_t hi) {
    call_ctx *c = arg;
    enum { STEP = 256 * 1024 };
    for (size_t i = lo; i < hi; ++i) {
        const unsigned char *p = c->u.crc.spans[i].data;
        size_t left = c->u.crc.spans[i].len;
        uint32_t crc = 0;
        while (left > 0) {
            size_t step = left < STEP ? left : STEP;
            crc = bn_crc32(crc, p, step);
            p += step;
            left -= step;
            if (left > 0 && blz_cancelled()) return;
        }
        c->u.crc.out[i] = crc;
    }
}

static void map_pieces(void *arg, size_t lo, size_t hi) {
    call_ctx *c = arg;
    if (c->u.map.f32) {
        bn_map_f32(c->u.map.op, c->u.map.mul, c->u.map.add, c->u.map.in, c->u.map.out, lo, hi);
    } else {
        bn_map_f64(c->u.map.op, c->u.map.mul, c->u.map.add, c->u.map.in, c->u.map.out, lo, hi);
    }
}

void call_task(void *arg) {
    call_ctx *c = arg;
    blz_status inner = BLZ_OK;
    c->ran = true;
    switch (c->kind) {
    case CALL_RUN:
        c->u.run.fn(c->u.run.arg);
        break;
    case CALL_FOR:
        inner = blz_parallel_for(c->pool, c->u.loop.begin, c->u.loop.end, c->u.loop.grain, c->u.loop.fn,
                                 c->u.loop.arg);
        break;
    case CALL_CRC32:
        inner = blz_parallel_for(c->pool, 0, c->u.crc.n, 1, crc_pieces, c);
        break;
    case CALL_SORT:
        if (bn_sort_f64(c->pool, c->u.sort.a, c->u.sort.tmp, c->u.sort.n)) inner = BLZ_ECANCELED;
        break;
    case CALL_MAP:
        inner = blz_parallel_for(c->pool, 0, c->u.map.n, c->u.map.grain, map_pieces, c);
        break;
    default:
        break;
    }
    /* A kernel that returned early because the call was cancelled (the
     * built-ins poll blz_cancelled) must not look like a success. */
    if (inner == BLZ_OK && blz_cancelled()) inner = BLZ_ECANCELED;
    c->inner = inner;
}

/* ---- the result (loop thread) ---- */

napi_value call_result(napi_env env, call_ctx *c) {
    napi_value result;
    switch (c->result_kind) {
    case RESULT_UNDEFINED: return napi_get_undefined(env, &result) == napi_ok ? result : NULL;
    case RESULT_NULL: return napi_get_null(env, &result) == napi_ok ? result : NULL;
    case RESULT_OBJECT: return napi_get_reference_value(env, c->result, &result) == napi_ok ? result : NULL;
    default: break;
    }
    /* CRC32: an array of numbers, as zlib.crc32 returns one number. */
    if (napi_create_array_with_length(env, c->u.crc.n, &result) != napi_ok) return NULL;
    for (size_t i = 0; i < c->u.crc.n; ++i) {
        napi_value v;
        if (napi_create_uint32(env, c->u.crc.out[i], &v) != napi_ok ||
            napi_set_element(env, result, (uint32_t)i, v) != napi_ok)
            return NULL;
    }
    return result;
}

void call_free_args(call_ctx *c) {
    if (c->kind == CALL_CRC32) {
        free(c->u.crc.spans);
        free(c->u.crc.out);
    } else if (c->kind == CALL_SORT) {
        free(c->u.sort.tmp);
    }
}

/* ---- the pool methods ---- */

/*
 * What run and parallelFor share, once their own arguments were checked:
 * fn must be a NativeFunction of the kind the call needs (a TypeError
 * otherwise), arg undefined, null or bytes. Returns a new call of `kind`
 * holding the arg (its memory in *data, as take_arg says) with *f its
 * function, or NULL: an exception pending, or *early a rejected promise
 * (a pool that takes no new calls).
 */
static call_ctx *native_call(napi_env env, pool_ctx *p, int kind, napi_value fn, napi_value arg, const native_fn **f,
                             void **data, napi_value *early) {
    *early = NULL;
    *f = unwrap_fn(env, fn);
    if (!*f) return NULL;
    if (kind == CALL_RUN ? (*f)->kind != 0 : (*f)->kind != 1) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE",
                              kind == CALL_RUN ? "run needs a NativeFunction of kind 'task'"
                                               : "parallelFor needs a NativeFunction of kind 'range'");
        return NULL;
    }
    js_bytes b;
    const js_bytes *bytes;
    if (!read_arg(env, arg, &b, &bytes)) return NULL;
    call_ctx *c = new_call(env, p, kind, early);
    if (c && !take_arg(env, c, arg, bytes, data)) {
        free_call(env, c);
        c = NULL;
    }
    return c;
}

/* run(handle, fn, arg, token, after) -> promise */
static napi_value js_run(napi_env env, napi_callback_info info) {
    GET_POOL_ARGS(5);
    const native_fn *f;
    void *data;
    napi_value early;
    call_ctx *c = native_call(env, p, CALL_RUN, argv[1], argv[2], &f, &data, &early);
    if (!c) return early;
    c->u.run.fn = f->fn.task;
    c->u.run.arg = data;
    size_t num_after = 0;
    blz_event **after = NULL;
    if (!after_events(env, argv[4], &after, &num_after)) {
        free_call(env, c); /* never submitted */
        return NULL;
    }
    napi_value promise = submit(env, p, c, argv[0], argv[3], after, num_after);
    free(after); /* read during the spawn only */
    return promise;
}

/* parallelFor(handle, begin, end, grain, fn, arg, token) -> promise */
static napi_value js_parallel_for(napi_env env, napi_callback_info info) {
    GET_POOL_ARGS(7);
    size_t begin, end, grain;
    if (!get_index(env, argv[1], "begin", &begin) || !get_index(env, argv[2], "end", &end) ||
        !get_index(env, argv[3], "grain", &grain))
        return NULL;
    if (begin > end) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "begin must not be greater than end");
        return NULL;
    }
    const native_fn *f;
    void *data;
    napi_value early;
    call_ctx *c = native_call(env, p, CALL_FOR, argv[4], argv[5], &f, &data, &early);
    if (!c) return early;
    c->u.loop.fn = f->fn.range;
    c->u.loop.arg = data;
    c->u.loop.begin = begin;
    c->u.loop.end = end;
    c->u.loop.grain = grain;
    return submit(env, p, c, argv[0], argv[6], NULL, 0);
}

/* crc32(handle, buffers, token) -> promise of numbers */
static napi_value js_crc32(napi_env env, napi_callback_info info) {
    GET_POOL_ARGS(3);
    bool is_array = false;
    if (napi_is_array(env, argv[1], &is_array) != napi_ok || !is_array) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "buffers must be an array");
        return NULL;
    }
    napi_value early;
    call_ctx *c = new_call(env, p, CALL_CRC32, &early);
    if (!c) return early;
    size_t n = 0;
    c->u.crc.spans = read_buffers(env, argv[1], &c->mem, &n);
    c->u.crc.n = n;
    c->u.crc.out = c->u.crc.spans ? malloc((n ? n : 1) * sizeof *c->u.crc.out) : NULL;
    if (!c->u.crc.out) {
        if (c->u.crc.spans) throw_status(env, BLZ_ENOMEM);
        free_call(env, c);
        return NULL;
    }
    return submit(env, p, c, argv[0], argv[2], NULL, 0);
}

/* sort(handle, float64array, token) -> promise of the same array */
static napi_value js_sort(napi_env env, napi_callback_info info) {
    GET_POOL_ARGS(3);
    js_bytes b;
    if (!read_js_bytes(env, argv[1], &b) || b.type != napi_float64_array) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "sort needs a Float64Array");
        return NULL;
    }
    napi_value early;
    call_ctx *c = new_call(env, p, CALL_SORT, &early);
    if (!c) return early;
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
    return submit(env, p, c, argv[0], argv[2], NULL, 0);
}

/* map(handle, input, output, op, mul, add, grain, token) -> promise of output */
static napi_value js_map(napi_env env, napi_callback_info info) {
    GET_POOL_ARGS(8);
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
    napi_value early;
    call_ctx *c = new_call(env, p, CALL_MAP, &early);
    if (!c) return early;
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
    return submit(env, p, c, argv[0], argv[7], NULL, 0);
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

const js_export calls_exports[] = {
    {"run", js_run},
    {"parallelFor", js_parallel_for},
    {"crc32", js_crc32},
    {"sort", js_sort},
    {"map", js_map},
    {"crc32Sync", js_crc32_sync},
    {NULL, NULL},
};
