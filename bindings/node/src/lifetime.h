/*
 * The lifetime core (lifetime.c): pools, calls, their completion and the
 * env's teardown. lifetime.c's opening comment says which thread does
 * what and what keeps each object alive; the call object is here because
 * the calls (calls.c) fill it in. A pool (pool_ctx) is opaque outside
 * lifetime.c.
 */
#ifndef BLITZ_NODE_LIFETIME_H
#define BLITZ_NODE_LIFETIME_H

#include "calls.h"

typedef struct pool_ctx pool_ctx;

/* One pool method's call: run, parallelFor, crc32, sort or map. */
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
    blz_task *task;       /* the task handle: cancel's target until settle or teardown joins it (then NULL) */
    bool cancelled;       /* cancel(token) reached the call before it settled: it settles as aborted */

    /* Set by the loop thread before the spawn, read by the task. */
    int kind;
    blz_pool *pool;
    call_args u;

    /* Written by the task and on_done on the worker, read by the loop
     * thread after it took the call from the done list under the lock. */
    bool ran;          /* the task started: its kernel may have written its memory */
    blz_status inner;  /* what the kernel reported: parallel_for's status, a cancel */
    blz_status status; /* on_done's */
    call_ctx *done_next;
};

/* The pool behind a pool handle, or NULL with a TypeError pending. */
pool_ctx *unwrap_pool(napi_env env, napi_value handle);

/* GET_ARGS(n), and p: the pool whose handle is argv[0] (else it returns NULL). */
#define GET_POOL_ARGS(n)                                                                      \
    GET_ARGS(n);                                                                              \
    pool_ctx *p = unwrap_pool(env, argv[0]);                                                  \
    if (!p) return NULL
/* Whether p takes new calls: checked before any copy is made, and again at
 * the spawn (reading a crc32 list can run JavaScript that closes the pool). */
bool accepting(const pool_ctx *p);
/* A promise already rejected with s's Error, or NULL with an exception pending. */
napi_value rejected(napi_env env, blz_status s);
/* Spawns c on p (see lifetime.c); owns c on every path. The promise, or
 * NULL with an exception pending. */
napi_value submit(napi_env env, pool_ctx *p, call_ctx *c, napi_value handle, napi_value token,
                  blz_event *const *after, size_t num_after);
/* The events of an `after` array (index.js passes event handles only):
 * *out a malloc'ed list the caller frees after submit (NULL, *count 0 for
 * undefined, null or an empty array). false with an exception pending for
 * a closed event (BLZ_EINVAL) or anything else. Reads own elements of an
 * array made by index.js: no JavaScript runs. */
bool after_events(napi_env env, napi_value after, blz_event ***out, size_t *count);
/* Frees a call that no worker can touch (never submitted, or settled). */
void free_call(napi_env env, call_ctx *c);

/* Once per env, from the module's init: its instance data and cleanup hook. */
bool lifetime_init_env(napi_env env);

/* createPool, poolThreads, stats, close, cancel, and the events' createEvent, setEvent, closeEvent. */
extern const js_export lifetime_exports[];

#endif
