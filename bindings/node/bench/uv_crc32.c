/*
 * The CRC-32 kernel of the Node addon on Node's own libuv threadpool
 * (UV_THREADPOOL_SIZE threads, 4 by default), one napi_async_work per
 * buffer: what an addon does without libblitz. A module of its own, built
 * for bindings/node/bench/hash.mjs only and never shipped in the package:
 * it exports uvCrc32(buffers) -> Promise<number[]>. It shares the addon's
 * argument code (src/args.c: the buffers are read and copied as a call's
 * are) and its kernels (src/kernels.c), nothing of its pools or calls.
 *
 * Lifetimes: a batch owns its copies (call_memory) and is freed on the
 * loop thread when its last napi_async_work completed; a libuv thread
 * only reads its span and writes its own slot of out[], with no Node-API.
 */
#include "../src/args.h"
#include "../src/kernels.h"

typedef struct uv_batch uv_batch;
typedef struct uv_item {
    uv_batch *batch;
    size_t index;
    napi_async_work work;
} uv_item;

struct uv_batch {
    napi_deferred deferred;
    call_memory mem; /* what spans point into (take_bytes), until the last item completed */
    byte_span *spans;
    uint32_t *out;
    size_t n, remaining; /* remaining: queued items not yet completed */
    bool failed;
    uv_item *items;
};

static void uv_free(napi_env env, uv_batch *b) {
    memory_free(env, &b->mem);
    free(b->spans);
    free(b->out);
    free(b->items);
    free(b);
}

static void uv_execute(napi_env env, void *data) { /* a libuv thread: no Node-API */
    (void)env;
    uv_item *it = data;
    byte_span s = it->batch->spans[it->index];
    it->batch->out[it->index] = bn_crc32(0, s.data, s.len);
}

static void uv_finish(napi_env env, uv_batch *b) {
    napi_value result;
    if (b->failed) {
        napi_value error = status_error(env, BLZ_ENOMEM);
        if (error) napi_reject_deferred(env, b->deferred, error);
    } else if (napi_create_array_with_length(env, b->n, &result) == napi_ok) {
        for (size_t i = 0; i < b->n; ++i) {
            napi_value v;
            napi_create_uint32(env, b->out[i], &v);
            napi_set_element(env, result, (uint32_t)i, v);
        }
        napi_resolve_deferred(env, b->deferred, result);
    }
    uv_free(env, b);
}

static void uv_complete(napi_env env, napi_status status, void *data) {
    uv_item *it = data;
    uv_batch *b = it->batch;
    napi_delete_async_work(env, it->work);
    if (status != napi_ok) b->failed = true;
    if (--b->remaining == 0) uv_finish(env, b);
}

/* uvCrc32(buffers) -> promise: one napi_async_work per buffer, as addons do today. */
static napi_value js_uv_crc32(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    size_t n = 0;
    napi_value promise, name;
    uv_batch *b = calloc(1, sizeof *b);
    if (!b) {
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    b->spans = read_buffers(env, argv[0], &b->mem, &n);
    if (!b->spans) {
        uv_free(env, b);
        return NULL;
    }
    b->out = malloc((n ? n : 1) * sizeof *b->out);
    b->items = calloc(n ? n : 1, sizeof *b->items);
    if (!b->out || !b->items) {
        uv_free(env, b);
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    uv_item *items = b->items;
    b->n = b->remaining = n;
    if (napi_create_promise(env, &b->deferred, &promise) != napi_ok ||
        napi_create_string_utf8(env, "libblitz:uvCrc32", NAPI_AUTO_LENGTH, &name) != napi_ok) {
        uv_free(env, b);
        throw_napi_failure(env, napi_generic_failure, "uvCrc32");
        return NULL;
    }
    if (n == 0) {
        napi_value empty;
        napi_create_array(env, &empty);
        napi_resolve_deferred(env, b->deferred, empty);
        uv_free(env, b);
        return promise;
    }
    for (size_t i = 0; i < n; ++i) {
        items[i].batch = b;
        items[i].index = i;
        bool made = napi_create_async_work(env, NULL, name, uv_execute, uv_complete, &items[i],
                                           &items[i].work) == napi_ok;
        if (!made || napi_queue_async_work(env, items[i].work) != napi_ok) {
            /* The items already queued still complete and use the batch:
             * count only them, and reject when the last one is done. */
            if (made) napi_delete_async_work(env, items[i].work);
            b->failed = true;
            b->remaining = i;
            if (i == 0) uv_finish(env, b);
            break;
        }
    }
    return promise;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
    bn_crc32_init();
    napi_value fn;
    CHECK_NAPI(env, napi_create_function(env, "uvCrc32", NAPI_AUTO_LENGTH, js_uv_crc32, NULL, &fn));
    CHECK_NAPI(env, napi_set_named_property(env, exports, "uvCrc32", fn));
    return exports;
}
