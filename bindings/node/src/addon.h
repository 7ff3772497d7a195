/*
 * The Node addon's shared declarations: its objects (env_data, pool_ctx,
 * call_ctx) and what each file offers the others. The files, by concern:
 *   lifetime.c  pools, calls, completion (on_done, the threadsafe function,
 *               settle) and env teardown: who frees what, and when
 *   args.c      arguments: statuses as errors, byte arguments and the
 *               memory a call's kernels use, handles and indices
 *   addon.c     the functions index.js calls, and the module's init
 *   kernels.c   the built-in C kernels (CRC-32, sort, map)
 * The libuv comparison is not part of the addon: bench/uv_crc32.c.
 */
#pragma once

#define _GNU_SOURCE
#define NAPI_VERSION 8

#include "kernels.h"

#include <blitz.h>
#include <node_api.h>

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>



/* Returns NULL from the calling napi_callback with a JS exception pending. */
#define CHECK_NAPI(env, call)                                                                 \
    do {                                                                                      \
        napi_status check_status_ = (call);                                                   \
        if (check_status_ != napi_ok) {                                                       \
            throw_napi_failure((env), check_status_, #call);                                  \
            return NULL;                                                                      \
        }                                                                                     \
    } while (0)

#define GET_ARGS(n)                                                                           \
    size_t argc = (n);                                                                        \
    napi_value argv[(n) > 0 ? (n) : 1];                                                       \
    CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));                    \
    if (argc < (n)) {                                                                         \
        napi_throw_type_error(env, "ERR_MISSING_ARGS", "missing arguments");                  \
        return NULL;                                                                          \
    }

/* ---- byte arguments ---- */

/*
 * A byte argument as the value itself says (never a JS property, which a
 * program can shadow): a TypedArray (Buffer included), DataView or
 * ArrayBuffer, its data pointer (advanced by the view's offset), its
 * length in bytes, and whether its memory is a SharedArrayBuffer's. True
 * only until JavaScript runs again, which may detach, transfer or shrink it.
 */
typedef struct js_bytes {
    unsigned char *data;
    size_t len;
    napi_value buffer; /* the ArrayBuffer or SharedArrayBuffer behind it */
    bool shared;       /* a SharedArrayBuffer: never detached, never shrunk */
    int type;          /* its napi_typedarray_type, or -1: a DataView or ArrayBuffer */
    size_t count;      /* a TypedArray's elements */
} js_bytes;

typedef struct byte_span {
    unsigned char *data;
    size_t len;
} byte_span;

/*
 * The memory a call's kernels use, chosen once per argument on the loop
 * thread, right after the argument was read (take_bytes). JavaScript can
 * detach an ArrayBuffer (transfer it: its new owner may free the memory
 * at once) or shrink a resizable one whenever it runs, and Node-API can
 * prevent neither, so a kernel never gets such memory: it gets a copy that
 * the call owns, written back on the loop thread when the call is settled,
 * into what the argument holds then (write_back). A SharedArrayBuffer is
 * never detached and never shrinks (a growable one grows in place), so
 * its bytes are used in place, zero-copy: a reference to the buffer keeps
 * them alive until the call is freed.
 */
typedef struct copy_chunk {
    struct copy_chunk *next;
    size_t used, cap;
    size_t mapped;       /* the mmap'd length, or 0: malloc'd */
    max_align_t bytes[]; /* aligned as malloc's: a copy of a Float64Array is a double[] */
} copy_chunk;

typedef struct call_memory {
    copy_chunk *chunks;     /* the copies: never moved, freed with the call */
    napi_ref *shared;       /* the SharedArrayBuffers used in place */
    size_t nshared, shared_cap;
    napi_value last_shared; /* the last one held; compared only within the napi callback that takes the bytes */
} call_memory;

/* ---- objects ---- */

typedef struct env_data env_data;
typedef struct pool_ctx pool_ctx;
typedef struct call_ctx call_ctx;

/* Per env (main thread, each worker_thread): instance data, loop thread only. */
struct env_data {
    pool_ctx *pools; /* pools not yet destroyed */
    bool torn_down;  /* the cleanup hook ran: no new pool */
};

enum call_kind { CALL_RUN, CALL_FOR, CALL_CRC32, CALL_SORT, CALL_MAP };

/* What a call's promise resolves to. */
enum result_kind { RESULT_UNDEFINED, RESULT_NULL, RESULT_OBJECT, RESULT_CRCS };

struct call_ctx {
    /* Loop thread only. */
    call_ctx *prev, *next; /* the pool's in-flight list */
    pool_ctx *owner;
    napi_deferred deferred;
    napi_ref handle;      /* the pool's JS handle: its finalizer never runs with the call in flight */
    napi_ref token;       /* the cancel token wrapping this call, or NULL */
    int result_kind;
    napi_ref result;      /* RESULT_OBJECT: the arg, the array, the output */
    byte_span back;       /* the call's copy of `result`'s bytes, written back at settle; data NULL: none */
    bool back_on_failure; /* write back also when the kernel ran and failed or was aborted */
    call_memory mem;      /* the memory the kernels use */
    blz_task *task;       /* the call's task handle, target of cancel; joined by settle or teardown */

    /* Set by the loop thread before the spawn, read by the task. */
    int kind;
    blz_pool *pool;
    union {
        struct { blz_fn fn; void *arg; } run;
        struct { blz_range_fn fn; void *arg; size_t begin, end, grain; } loop;
        struct { byte_span *spans; uint32_t *out; size_t n; } crc; /* spans: in mem */
        struct { double *a, *tmp; size_t n; } sort;
        struct { int op, f32; double mul, add; void *in, *out; size_t n, grain; } map; /* in, out: in mem */
    } u;

    /* Written by the task and on_done on the worker, read by the loop
     * thread after it took the call from the done list under the lock. */
    bool ran;          /* the task started: its kernel may have written its memory */
    blz_status inner;  /* what the kernel reported: parallel_for's status, a cancel */
    blz_status status; /* on_done's */
    call_ctx *done_next;
};

struct pool_ctx {
    /* Loop thread only. */
    env_data *ed;             /* NULL once unlinked from the env's list */
    pool_ctx *prev, *next;    /* the env's list */
    blz_pool *pool;           /* NULL once destroyed */
    uint32_t threads;
    int refs;                 /* JS handle + tsfn */
    bool handle_alive;
    bool tsfn_released;       /* we gave up our use of the tsfn */
    bool closing;             /* close() was called: new calls are refused */
    call_ctx *calls;          /* accepted, not yet settled */
    size_t in_flight;
    napi_deferred close_deferred;
    napi_ref close_promise;
    napi_threadsafe_function tsfn;

    /* Shared with the workers' on_done: under lock. */
    pthread_mutex_t lock;
    bool tsfn_alive;          /* cleared by the tsfn's finalizer */
    bool signalled;           /* a wake-up is queued and deliver has not taken the list yet */
    call_ctx *done_head, *done_tail;
};

extern const napi_type_tag POOL_TAG;
extern const napi_type_tag FN_TAG;
/* A cancel token: a fresh object per call, tagged and wrapped by submit. */
extern const napi_type_tag TOKEN_TAG;

/* A native function: a blz_fn (kind 0) or a blz_range_fn (kind 1). */
typedef struct native_fn {
    int kind;
    union { blz_fn task; blz_range_fn range; } fn;
} native_fn;


/* env_data with its env: the cleanup hook gets only the pointer it was
 * registered with, and freeing the calls' references needs the env. */
typedef struct env_box {
    env_data data;
    napi_env env;
} env_box;

/* ---- args.c ---- */

void throw_napi_failure(napi_env env, napi_status status, const char *what);
napi_status status_name(napi_env env, blz_status s, napi_value *out);
napi_value status_error(napi_env env, blz_status s);
void throw_status(napi_env env, blz_status s);
bool is_undefined_or_null(napi_env env, napi_value v);
size_t element_size(napi_typedarray_type type);
bool read_js_bytes(napi_env env, napi_value v, js_bytes *b);
bool get_bytes(napi_env env, napi_value v, js_bytes *b, const char *what);
copy_chunk *chunk_new(size_t cap);
void chunk_free(copy_chunk *c);
unsigned char *memory_alloc(call_memory *m, size_t len);
void memory_free(napi_env env, call_memory *m);
bool memory_hold(napi_env env, call_memory *m, napi_value buffer);
bool take_bytes(napi_env env, call_memory *m, const js_bytes *b, bool copy_in, byte_span *out);
bool write_back(napi_env env, napi_value target, byte_span copy);
napi_value detached_error(napi_env env);
void *unwrap_tagged(napi_env env, napi_value handle, const napi_type_tag *tag, const char *what);
pool_ctx *unwrap_pool(napi_env env, napi_value handle);
native_fn *unwrap_fn(napi_env env, napi_value handle);
bool get_index(napi_env env, napi_value v, const char *what, size_t *out);
byte_span *read_buffers(napi_env env, napi_value list, call_memory *m, size_t *count);

/* ---- lifetime.c ---- */

void pool_unref(pool_ctx *p);
void unlink_pool(pool_ctx *p);
void release_tsfn(pool_ctx *p);
void join_task(call_ctx *c);
void free_call(napi_env env, call_ctx *c);
void unlink_call(pool_ctx *p, call_ctx *c);
void call_task(void *arg);
void crc_pieces(void *arg, size_t lo, size_t hi);
void map_pieces(void *arg, size_t lo, size_t hi);
void call_done(void *done_arg, blz_status status);
napi_value make_result(napi_env env, call_ctx *c);
bool deliver_copy(napi_env env, call_ctx *c, blz_status s);
void settle(napi_env env, pool_ctx *p, call_ctx *c);
void deliver(napi_env env, napi_value js_cb, void *context, void *data);
void tsfn_finalized(napi_env env, void *data, void *hint);
void destroy_idle_pool(pool_ctx *p);
void finish_close(napi_env env, pool_ctx *p);
void pool_handle_finalize(napi_env env, void *data, void *hint);
void teardown_pool(napi_env env, pool_ctx *p);
void env_cleanup(void *arg);
void env_data_finalize(napi_env env, void *data, void *hint);
env_data *get_env_data(napi_env env);
napi_value rejected(napi_env env, blz_status s);
bool accepting(const pool_ctx *p);
napi_value submit(napi_env env, pool_ctx *p, call_ctx *c, napi_value handle, napi_value token);
call_ctx *new_call(napi_env env, int kind);
bool set_result(napi_env env, call_ctx *c, napi_value v);
bool take_arg(napi_env env, call_ctx *c, napi_value arg, const js_bytes *b, void **data);
bool read_arg(napi_env env, napi_value arg, js_bytes *b, const js_bytes **out);
