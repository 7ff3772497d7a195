/*
 * libblitz for Node.js: a Node-API addon over libblitz.so's C ABI.
 *
 * index.js validates arguments and wires AbortSignals; this file owns the
 * native side. docs/embedding.md ("Node.js through Node-API") explains the
 * rules; here is how this file keeps them.
 *
 * Threads.
 *  - The loop thread (the env's JavaScript thread: the main thread, or a
 *    worker_thread) makes every Node-API call. It creates pools, spawns,
 *    cancels, settles promises, and frees everything below.
 *  - libblitz workers run the kernels (C only: a V8 isolate is
 *    single-threaded, and no worker ever makes a Node-API call) and each
 *    call's on_done. on_done appends the call to its pool's done list under
 *    the pool's lock and, if the loop has not been signalled yet, signals it
 *    with napi_call_threadsafe_function (nonblocking; the queue is
 *    unbounded, so it never waits for the loop). It does not wait for
 *    anything, as blitz.h asks of an on_done.
 *  - The threadsafe function (tsfn, one per pool) carries no data, only
 *    the wake-up: its call_js (deliver) takes the whole done list and
 *    settles each promise. A completion is therefore never lost if the
 *    tsfn refuses a call (at env teardown), and never owned by Node's
 *    queue: the done list and the in-flight list are ours.
 *  - No polling, no blocking: the loop sleeps in epoll until a tsfn wake-up.
 *    The only libblitz call on the loop that can wait is blz_pool_destroy,
 *    made when no accepted work is left (close, a garbage-collected pool),
 *    where it only joins idle workers, and at env teardown, where it must
 *    wait (below). blz_join of a call's task is made only once its on_done
 *    ran, which (BLZ_SPAWN_DONE_AFTER_FINISH) comes after the task finished:
 *    it returns at once.
 *
 * Lifetimes: every object another thread can touch, and what keeps it alive.
 *  - call_ctx (one per run/parallelFor/crc32/sort/map): written by the task
 *    and on_done on a worker, freed by the loop thread after it took the
 *    call from the done list (or, at teardown, after blz_pool_destroy
 *    returned). From blz_spawn_ex's BLZ_OK until on_done has unlocked the
 *    pool's lock, the worker side may touch it; the loop thread does not
 *    free it before taking it out of the done list under that lock.
 *  - The memory a kernel reads or writes (call_memory, take_bytes): never
 *    memory JavaScript can take away. Node-API cannot stop a program from
 *    detaching an ArrayBuffer (a transfer hands its memory to a new owner,
 *    which may free it at once) or shrinking a resizable one, so such bytes
 *    are copied into memory the call owns (malloc), on the loop thread,
 *    right after the addon itself read the argument and before any
 *    JavaScript can run again; the copy is freed with the call, after
 *    on_done, and written back into what the argument holds at settle
 *    time, if it still has the room. A SharedArrayBuffer cannot be
 *    detached or shrunk: its bytes are used in place, and a napi reference
 *    to the buffer (not to a view, whose .buffer a program can shadow)
 *    keeps them alive until the call is freed.
 *  - The objects a call answers with (its result, the pool's handle, the
 *    cancel token): each held by a napi reference of its own, never through
 *    a JS array, whose element stores a setter on Array.prototype could
 *    intercept. Deleted when the call is freed.
 *  - pool_ctx: two owners, counted in `refs` (loop thread only): the JS
 *    handle object (its napi_wrap finalizer) and the tsfn (its finalizer).
 *    Workers reach it only through a call's on_done, which blz_pool_destroy
 *    waits for, and blz_pool_destroy always comes before the last owner
 *    lets go. Every call holds the JS handle (call_ctx.handle), so the
 *    handle's finalizer never runs with work in flight.
 *  - The tsfn: Node deletes it right after its finalizer (tsfn_finalized)
 *    returns, which happens when we release it (close, finalizer) or when
 *    the env is torn down. tsfn_finalized clears tsfn_alive under the
 *    pool's lock; on_done calls the tsfn only under that lock and only
 *    while tsfn_alive is set, so no worker is inside a tsfn call when Node
 *    deletes it.
 *  - blz_pool: destroyed on the loop thread by close (once no call is in
 *    flight), by the handle's finalizer (none can be), or by the env
 *    cleanup hook.
 *  - A call's task handle (call_ctx.task, the target of cancel): written
 *    by blz_spawn_ex on the loop thread and used only there: by cancel
 *    (blz_task_cancel) while the call's token is wrapped, and by settle or
 *    the env teardown, which join it (freeing it) after on_done ran or
 *    after blz_pool_destroy returned. The task was spawned with
 *    BLZ_SPAWN_DONE_AFTER_FINISH, so on_done runs once it has finished and
 *    that join never waits; no worker touches the handle.
 *  - Native functions looked up by name: their library stays loaded for
 *    the life of the process (never dlclose'd), as Node's own addons do, so
 *    no pointer a queued task holds can dangle.
 *
 * Exit and env teardown.
 *  - The env cleanup hook (registered when the addon is loaded into an env,
 *    before any pool's tsfn, so it runs after the tsfns' own hooks, which
 *    only start closing them) cancels every call's task (queued tasks are
 *    skipped, built-in kernels stop at their next check) and destroys the
 *    env's pools: blz_pool_destroy waits for the kernels still running,
 *    which may be using V8's memory, and for every on_done. Only then does
 *    Node free the isolate and its heap. Undelivered calls are freed
 *    without settling: no JavaScript can run any more.
 *  - process.exit() on the main thread calls exit() without tearing the
 *    env down (no cleanup hooks): the workers go on until the process ends,
 *    the heap they use is never freed before that, and a late on_done
 *    only signals a loop that no longer runs. Node terminates worker_threads
 *    first, and their teardown runs the hook above.
 */
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

/* ---- small helpers ---- */

/* Returns NULL from the calling napi_callback with a JS exception pending. */
#define CHECK_NAPI(env, call)                                                                 \
    do {                                                                                      \
        napi_status check_status_ = (call);                                                   \
        if (check_status_ != napi_ok) {                                                       \
            throw_napi_failure((env), check_status_, #call);                                  \
            return NULL;                                                                      \
        }                                                                                     \
    } while (0)

static void throw_napi_failure(napi_env env, napi_status status, const char *what) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) return;
    const napi_extended_error_info *info = NULL;
    napi_get_last_error_info(env, &info);
    char message[256];
    snprintf(message, sizeof message, "libblitz: Node-API call failed (%d: %s): %s", (int)status,
             info && info->error_message ? info->error_message : "unknown", what);
    napi_throw_error(env, "ERR_BLITZ_NAPI", message);
}

static const char *status_name(blz_status s) {
    switch (s) {
    case BLZ_OK: return "BLZ_OK";
    case BLZ_EINVAL: return "BLZ_EINVAL";
    case BLZ_ENOMEM: return "BLZ_ENOMEM";
    case BLZ_ETHREAD: return "BLZ_ETHREAD";
    case BLZ_ESHUTDOWN: return "BLZ_ESHUTDOWN";
    case BLZ_EDEADLK: return "BLZ_EDEADLK";
    case BLZ_ETASK: return "BLZ_ETASK";
    case BLZ_EFORK: return "BLZ_EFORK";
    case BLZ_ETIMEDOUT: return "BLZ_ETIMEDOUT";
    case BLZ_ECANCELED: return "BLZ_ECANCELED";
    default: return "BLZ_EUNKNOWN";
    }
}

/* An Error with .code = the status name and .status = the number. */
static napi_value status_error(napi_env env, blz_status s) {
    napi_value code, message, error, number;
    if (napi_create_string_utf8(env, status_name(s), NAPI_AUTO_LENGTH, &code) != napi_ok ||
        napi_create_string_utf8(env, blz_status_string(s), NAPI_AUTO_LENGTH, &message) != napi_ok ||
        napi_create_error(env, code, message, &error) != napi_ok)
        return NULL;
    if (napi_create_int32(env, s, &number) == napi_ok) napi_set_named_property(env, error, "status", number);
    return error;
}

static void throw_status(napi_env env, blz_status s) {
    napi_value error = status_error(env, s);
    if (error) napi_throw(env, error);
}

static bool is_undefined_or_null(napi_env env, napi_value v) {
    napi_valuetype t;
    return napi_typeof(env, v, &t) != napi_ok || t == napi_undefined || t == napi_null;
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

static size_t element_size(napi_typedarray_type type) {
    switch (type) {
    case napi_int16_array: case napi_uint16_array: return 2;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: return 4;
    case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: return 8;
    default: return 1;
    }
}

/* false, with nothing pending, if v is none of those. */
static bool read_js_bytes(napi_env env, napi_value v, js_bytes *b) {
    bool is = false;
    void *data = NULL;
    b->type = -1;
    b->count = 0;
    if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
        napi_typedarray_type type;
        if (napi_get_typedarray_info(env, v, &type, &b->count, &data, &b->buffer, NULL) != napi_ok) return false;
        b->type = (int)type;
        b->len = b->count * element_size(type);
    } else if (napi_is_dataview(env, v, &is) == napi_ok && is) {
        if (napi_get_dataview_info(env, v, &b->len, &data, &b->buffer, NULL) != napi_ok) return false;
    } else if (napi_is_arraybuffer(env, v, &is) == napi_ok && is) {
        if (napi_get_arraybuffer_info(env, v, &data, &b->len) != napi_ok) return false;
        b->buffer = v;
    } else {
        return false;
    }
    /* napi_is_arraybuffer is V8's IsArrayBuffer, false for a SharedArrayBuffer:
     * the one test of shared memory Node-API 8 has, made on the real buffer. */
    bool plain = true;
    if (napi_is_arraybuffer(env, b->buffer, &plain) != napi_ok) return false;
    b->shared = !plain;
    b->data = data;
    if (!data) b->len = 0; /* detached */
    return true;
}

/* read_js_bytes, with a TypeError naming `what` pending when v holds no bytes. */
static bool get_bytes(napi_env env, napi_value v, js_bytes *b, const char *what) {
    if (read_js_bytes(env, v, b)) return true;
    char message[160];
    snprintf(message, sizeof message, "%s must be a Buffer, TypedArray, DataView or ArrayBuffer", what);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
    return false;
}

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

enum { COPY_ALIGN = _Alignof(max_align_t), HUGE_PAGE = 2 << 20, LARGEST_CHUNK = 64 << 20 };

/*
 * A chunk of at least cap bytes. From 2 MiB on it is mapped on its own and
 * advised into transparent huge pages: the copy's first touch of fresh
 * memory, not memcpy, is what a large copy costs (one page fault per
 * 4 KiB otherwise; the measurements are in docs/embedding.md). Pages a
 * call never touches cost nothing, so chunks can be generous.
 */
static copy_chunk *chunk_new(size_t cap) {
    size_t bytes = sizeof(copy_chunk) + cap;
    copy_chunk *c;
    if (bytes >= HUGE_PAGE) {
        bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        madvise(p, bytes, MADV_HUGEPAGE); /* advice only: EINVAL without THP changes nothing */
        c = p;
        c->mapped = bytes;
        c->cap = bytes - sizeof(copy_chunk);
    } else {
        c = malloc(bytes);
        if (!c) return NULL;
        c->mapped = 0;
        c->cap = cap;
    }
    c->used = 0;
    c->next = NULL;
    return c;
}

static void chunk_free(copy_chunk *c) {
    if (c->mapped) munmap(c, c->mapped); else free(c);
}

/* len bytes the call owns, or NULL. Chunks double up to 64 MiB, so that
 * many small buffers cost few allocations, and a large one gets its own. */
static unsigned char *memory_alloc(call_memory *m, size_t len) {
    if (len > SIZE_MAX / 4) return NULL;
    size_t need = len ? (len + COPY_ALIGN - 1) / COPY_ALIGN * COPY_ALIGN : COPY_ALIGN;
    copy_chunk *head = m->chunks;
    if (!head || head->cap - head->used < need) {
        size_t cap = head ? 2 * head->cap : need;
        if (cap > LARGEST_CHUNK) cap = LARGEST_CHUNK;
        if (cap < need) cap = need;
        copy_chunk *fresh = chunk_new(cap);
        if (!fresh) return NULL;
        fresh->next = head;
        m->chunks = head = fresh;
    }
    unsigned char *p = (unsigned char *)head->bytes + head->used;
    head->used += need;
    return p;
}

/* Frees the copies and lets the SharedArrayBuffers go (loop thread). */
static void memory_free(napi_env env, call_memory *m) {
    while (m->chunks) {
        copy_chunk *next = m->chunks->next;
        chunk_free(m->chunks);
        m->chunks = next;
    }
    for (size_t i = 0; i < m->nshared; ++i) napi_delete_reference(env, m->shared[i]);
    free(m->shared);
    m->shared = NULL;
    m->nshared = m->shared_cap = 0;
    m->last_shared = NULL;
}

/* Holds a SharedArrayBuffer until the call is freed; views of one buffer
 * in a row (a list of slices) share one reference. */
static bool memory_hold(napi_env env, call_memory *m, napi_value buffer) {
    bool same = false;
    if (m->last_shared && napi_strict_equals(env, m->last_shared, buffer, &same) == napi_ok && same) return true;
    if (m->nshared == m->shared_cap) {
        size_t cap = m->shared_cap ? 2 * m->shared_cap : 4;
        napi_ref *grown = realloc(m->shared, cap * sizeof *grown);
        if (!grown) return false;
        m->shared = grown;
        m->shared_cap = cap;
    }
    if (napi_create_reference(env, buffer, 1, &m->shared[m->nshared]) != napi_ok) return false;
    m->nshared++;
    m->last_shared = buffer;
    return true;
}

/*
 * The memory the kernel will use for b, which must have been read just
 * now, with no JavaScript run since: b's own bytes if they are a
 * SharedArrayBuffer's, else a copy the call owns (of b's contents when
 * copy_in; an output needs none). false with an exception pending.
 */
static bool take_bytes(napi_env env, call_memory *m, const js_bytes *b, bool copy_in, byte_span *out) {
    if (b->shared) {
        if (!memory_hold(env, m, b->buffer)) {
            throw_status(env, BLZ_ENOMEM);
            return false;
        }
        out->data = b->data;
        out->len = b->len;
        return true;
    }
    unsigned char *copy = memory_alloc(m, b->len);
    if (!copy) {
        throw_status(env, BLZ_ENOMEM);
        return false;
    }
    if (copy_in && b->len) memcpy(copy, b->data, b->len);
    out->data = copy;
    out->len = b->len;
    return true;
}

/*
 * Writes a call's copy into what `target` holds now (loop thread: the
 * bytes are read and written with no JavaScript in between). false if
 * target was detached or shrunk below the copy's length meanwhile.
 */
static bool write_back(napi_env env, napi_value target, byte_span copy) {
    js_bytes now;
    if (!read_js_bytes(env, target, &now) || now.len < copy.len) return false;
    if (copy.len) memcpy(now.data, copy.data, copy.len);
    return true;
}

/* The rejection of a call whose output memory went away before it settled. */
static napi_value detached_error(napi_env env) {
    napi_value code, message, error;
    if (napi_create_string_utf8(env, "ERR_BLITZ_DETACHED", NAPI_AUTO_LENGTH, &code) != napi_ok ||
        napi_create_string_utf8(env,
                                "libblitz: the call's output buffer was detached or shrunk before the call "
                                "settled; its result was not written",
                                NAPI_AUTO_LENGTH, &message) != napi_ok ||
        napi_create_error(env, code, message, &error) != napi_ok)
        return NULL;
    return error;
}

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

static const napi_type_tag POOL_TAG = {0x626c69747a2d6e6fULL, 0x64652d706f6f6c31ULL};
static const napi_type_tag FN_TAG = {0x626c69747a2d6e6fULL, 0x64652d666e637431ULL};
/* A cancel token: a fresh object per call, tagged and wrapped by submit. */
static const napi_type_tag TOKEN_TAG = {0x626c69747a2d6e6fULL, 0x64652d746f6b3031ULL};

/* A native function: a blz_fn (kind 0) or a blz_range_fn (kind 1). */
typedef struct native_fn {
    int kind;
    union { blz_fn task; blz_range_fn range; } fn;
} native_fn;

/* ---- pool_ctx ownership ---- */

static void pool_unref(pool_ctx *p) {
    if (--p->refs > 0) return;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void unlink_pool(pool_ctx *p) {
    if (!p->ed) return;
    if (p->prev) p->prev->next = p->next; else p->ed->pools = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->ed = NULL;
}

/* Our last use of the tsfn: Node finalizes it (tsfn_finalized) once the
 * wake-up it may still hold was dispatched. */
static void release_tsfn(pool_ctx *p) {
    if (p->tsfn_released) return;
    p->tsfn_released = true;
    pthread_mutex_lock(&p->lock);
    bool alive = p->tsfn_alive;
    pthread_mutex_unlock(&p->lock);
    if (alive) napi_release_threadsafe_function(p->tsfn, napi_tsfn_release);
}

/* Frees a call's task handle (loop thread). The task has finished: it was
 * spawned with BLZ_SPAWN_DONE_AFTER_FINISH, so by the time its on_done put
 * the call on the done list (or blz_pool_destroy returned) the join
 * returns at once, and the loop thread never waits for a worker here. */
static void join_task(call_ctx *c) {
    if (!c->task) return;
    blz_join(c->task);
    c->task = NULL;
}

/* ---- calls ---- */

/* Frees a call that no worker can touch any more, and its references
 * (loop thread). Its promise, if any, must be settled or abandoned. */
static void free_call(napi_env env, call_ctx *c) {
    if (c->token) {
        napi_value token;
        if (napi_get_reference_value(env, c->token, &token) == napi_ok && token) {
            void *unused;
            napi_remove_wrap(env, token, &unused);
        }
        napi_delete_reference(env, c->token);
    }
    if (c->handle) napi_delete_reference(env, c->handle);
    if (c->result) napi_delete_reference(env, c->result);
    memory_free(env, &c->mem);
    if (c->kind == CALL_CRC32) {
        free(c->u.crc.spans);
        free(c->u.crc.out);
    } else if (c->kind == CALL_SORT) {
        free(c->u.sort.tmp);
    }
    free(c);
}

static void unlink_call(pool_ctx *p, call_ctx *c) {
    if (c->prev) c->prev->next = c->next; else p->calls = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    p->in_flight--;
}

static void finish_close(napi_env env, pool_ctx *p);
static void crc_pieces(void *arg, size_t lo, size_t hi);
static void map_pieces(void *arg, size_t lo, size_t hi);

/* Runs on a worker: the task of every call. */
static void call_task(void *arg) {
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

/*
 * on_done, on the worker that finished (or skipped) the task. The call's
 * pool_ctx is alive: blz_pool_destroy, which comes before its last owner
 * lets go, waits for this on_done. Nothing here waits for the loop thread.
 */
static void call_done(void *done_arg, blz_status status) {
    call_ctx *c = done_arg;
    pool_ctx *p = c->owner;
    c->status = status;
    c->done_next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->done_tail) p->done_tail->done_next = c; else p->done_head = c;
    p->done_tail = c;
    if (!p->signalled && p->tsfn_alive) {
        /* Nonblocking on an unbounded queue: napi_ok, or napi_closing /
         * napi_invalid_arg once the env is being torn down, when the cleanup
         * hook frees the call instead. Called under the lock so that the
         * tsfn's finalizer cannot complete (and Node delete it) meanwhile. */
        if (napi_call_threadsafe_function(p->tsfn, NULL, napi_tsfn_nonblocking) == napi_ok) p->signalled = true;
    }
    pthread_mutex_unlock(&p->lock);
    /* From here on the loop thread may free c: it is not touched again. */
}

static napi_value make_result(napi_env env, call_ctx *c) {
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

/*
 * Writes the call's copy back into its result, when the call has one and
 * wants it now: on success, or once its kernel ran (and may have written)
 * for calls whose partial writes count. false if the result's memory went
 * away meanwhile.
 */
static bool deliver_copy(napi_env env, call_ctx *c, blz_status s) {
    if (!c->back.data || !(s == BLZ_OK || (c->back_on_failure && c->ran))) return true;
    napi_value target;
    return napi_get_reference_value(env, c->result, &target) == napi_ok && target &&
           write_back(env, target, c->back);
}

/* Settles one finished call and frees it (loop thread). The copy is
 * written back before the promise is settled: resolving may run
 * JavaScript (a `then` getter on the result), which could detach it. */
static void settle(napi_env env, pool_ctx *p, call_ctx *c) {
    napi_handle_scope scope;
    bool scoped = napi_open_handle_scope(env, &scope) == napi_ok;
    unlink_call(p, c);
    join_task(c);
    blz_status s = c->status != BLZ_OK ? c->status : c->inner;
    bool delivered = deliver_copy(env, c, s);
    napi_value value = NULL;
    if (s == BLZ_OK && delivered) {
        value = make_result(env, c);
        if (value) {
            napi_resolve_deferred(env, c->deferred, value);
        } else {
            s = BLZ_ENOMEM; /* a JS allocation failed: reject rather than leave the promise pending */
        }
    }
    if (s != BLZ_OK || !delivered) {
        bool pending = false;
        napi_value error = NULL;
        if (napi_is_exception_pending(env, &pending) == napi_ok && pending) {
            napi_get_and_clear_last_exception(env, &error);
        }
        if (!error) error = s == BLZ_OK ? detached_error(env) : status_error(env, s);
        if (!error) napi_get_undefined(env, &error);
        napi_reject_deferred(env, c->deferred, error);
    }
    free_call(env, c);
    if (scoped) napi_close_handle_scope(env, scope);
}

/*
 * The tsfn's call_js: on the loop thread, once per wake-up. env is NULL
 * when Node drops a queued wake-up at teardown; the cleanup hook has then
 * freed the calls already (or will), so there is nothing to do.
 */
static void deliver(napi_env env, napi_value js_cb, void *context, void *data) {
    (void)js_cb;
    (void)data;
    if (!env) return;
    pool_ctx *p = context;
    pthread_mutex_lock(&p->lock);
    call_ctx *list = p->done_head;
    p->done_head = p->done_tail = NULL;
    p->signalled = false; /* the next completion signals again */
    pthread_mutex_unlock(&p->lock);
    while (list) {
        call_ctx *next = list->done_next;
        settle(env, p, list);
        list = next;
    }
    if (p->in_flight == 0) {
        /* Idle: the pool no longer keeps the process alive. */
        if (!p->tsfn_released) napi_unref_threadsafe_function(env, p->tsfn);
        if (p->closing && p->pool) finish_close(env, p);
    }
}

/* Node runs this on the loop thread right before it deletes the tsfn. */
static void tsfn_finalized(napi_env env, void *data, void *hint) {
    (void)env;
    (void)hint;
    pool_ctx *p = data;
    pthread_mutex_lock(&p->lock); /* waits for an on_done inside napi_call_threadsafe_function */
    p->tsfn_alive = false;
    pthread_mutex_unlock(&p->lock);
    p->tsfn_released = true;
    pool_unref(p);
}

/* Destroys the blz_pool of a pool with no call in flight (loop thread). */
static void destroy_idle_pool(pool_ctx *p) {
    if (!p->pool) return;
    /* No accepted work is left (every call was settled), so this only
     * waits for the last on_done to return and joins the idle workers. */
    blz_pool_destroy(p->pool);
    p->pool = NULL;
    unlink_pool(p);
}

static void finish_close(napi_env env, pool_ctx *p) {
    destroy_idle_pool(p);
    release_tsfn(p);
    if (p->close_deferred) {
        napi_value undefined;
        napi_get_undefined(env, &undefined);
        napi_resolve_deferred(env, p->close_deferred, undefined);
        p->close_deferred = NULL;
    }
}

/* The JS handle was garbage-collected, or the env is being torn down. */
static void pool_handle_finalize(napi_env env, void *data, void *hint) {
    (void)hint;
    pool_ctx *p = data;
    p->handle_alive = false;
    /* Every call holds the handle, so none is in flight here (at teardown
     * the cleanup hook has destroyed the pool already). */
    destroy_idle_pool(p);
    release_tsfn(p);
    if (p->close_deferred) {
        /* close() was pending with nothing in flight: cannot happen, since
         * finish_close runs when the last call settles; be defensive. */
        napi_value undefined;
        napi_get_undefined(env, &undefined);
        napi_resolve_deferred(env, p->close_deferred, undefined);
        p->close_deferred = NULL;
    }
    if (p->close_promise) {
        napi_delete_reference(env, p->close_promise);
        p->close_promise = NULL;
    }
    pool_unref(p);
}

/* ---- env teardown ---- */

static void teardown_pool(napi_env env, pool_ctx *p) {
    /* Skip what has not started; built-in kernels stop at their next check. */
    for (call_ctx *c = p->calls; c; c = c->next)
        if (c->task) blz_task_cancel(c->task);
    /* Waits for the kernels still running (they may use V8's heap, which
     * Node frees after this hook) and for every on_done. */
    if (p->pool) {
        blz_pool_destroy(p->pool);
        p->pool = NULL;
    }
    /* No worker touches p or any call now. */
    pthread_mutex_lock(&p->lock);
    p->done_head = p->done_tail = NULL;
    pthread_mutex_unlock(&p->lock);
    while (p->calls) {
        call_ctx *c = p->calls;
        unlink_call(p, c);
        join_task(c); /* finished: destroy waited for it */
        /* The deferred is left unsettled: no JavaScript runs any more, and
         * Node frees what it holds with the isolate. */
        free_call(env, c);
    }
    p->closing = true;
    /* A pending close() stays pending, like the calls: nothing can observe it. */
    p->close_deferred = NULL;
    if (p->close_promise) {
        napi_delete_reference(env, p->close_promise);
        p->close_promise = NULL;
    }
    unlink_pool(p);
    /* The tsfn's own cleanup hook has already started closing it; Node
     * finalizes it later in the teardown (tsfn_finalized). */
}

/* env_data with its env: the cleanup hook gets only the pointer it was
 * registered with, and freeing the calls' references needs the env. */
typedef struct env_box {
    env_data data;
    napi_env env;
} env_box;

static void env_cleanup(void *arg) {
    env_data *ed = arg;
    ed->torn_down = true;
    napi_env env = ((env_box *)ed)->env;
    while (ed->pools) teardown_pool(env, ed->pools);
}

static void env_data_finalize(napi_env env, void *data, void *hint) {
    (void)hint;
    env_box *box = data;
    /* The cleanup hook ran first (it runs before the env is deleted); if it
     * somehow did not, do its work now. */
    if (!box->data.torn_down) {
        napi_remove_env_cleanup_hook(env, env_cleanup, &box->data);
        env_cleanup(&box->data);
    }
    free(box);
}

static env_data *get_env_data(napi_env env) {
    void *data = NULL;
    if (napi_get_instance_data(env, &data) != napi_ok) return NULL;
    return data;
}

/* ---- argument access ---- */

/* The native object behind a JS handle made with `tag`, or NULL with a
 * TypeError naming what was expected. */
static void *unwrap_tagged(napi_env env, napi_value handle, const napi_type_tag *tag, const char *what) {
    bool ok = false;
    napi_valuetype t;
    if (napi_typeof(env, handle, &t) == napi_ok && t == napi_object &&
        napi_check_object_type_tag(env, handle, tag, &ok) == napi_ok && ok) {
        void *native = NULL;
        if (napi_unwrap(env, handle, &native) == napi_ok) return native;
    }
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", what);
    return NULL;
}

static pool_ctx *unwrap_pool(napi_env env, napi_value handle) {
    return unwrap_tagged(env, handle, &POOL_TAG, "not a libblitz pool handle");
}

static native_fn *unwrap_fn(napi_env env, napi_value handle) {
    return unwrap_tagged(env, handle, &FN_TAG, "not a libblitz NativeFunction");
}

/* A non-negative integer that fits a size_t and a double exactly. */
static bool get_index(napi_env env, napi_value v, const char *what, size_t *out) {
    double d;
    if (napi_get_value_double(env, v, &d) != napi_ok) {
        char message[128];
        snprintf(message, sizeof message, "%s must be a number", what);
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
        return false;
    }
    if (!(d >= 0) || d > 9007199254740991.0 || d != floor(d)) {
        char message[160];
        snprintf(message, sizeof message, "%s must be an integer from 0 to 2^53 - 1", what);
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", message);
        return false;
    }
    *out = (size_t)d;
    return true;
}

/* ---- submission ---- */

static napi_value rejected(napi_env env, blz_status s) {
    napi_deferred d;
    napi_value promise;
    CHECK_NAPI(env, napi_create_promise(env, &d, &promise));
    napi_value error = status_error(env, s);
    if (!error) return NULL;
    CHECK_NAPI(env, napi_reject_deferred(env, d, error));
    return promise;
}

/* Whether p takes new calls: checked before any copy is made, and again at
 * the spawn (reading a crc32 list can run JavaScript that closes the pool). */
static bool accepting(const pool_ctx *p) { return p->pool && !p->closing; }

/*
 * Spawns call c of pool p; handle is the pool's JS handle, token (or
 * undefined) becomes its cancel handle. Takes ownership of c on every
 * path. Returns the promise, or NULL with an exception pending.
 */
static napi_value submit(napi_env env, pool_ctx *p, call_ctx *c, napi_value handle, napi_value token) {
    if (!accepting(p)) {
        free_call(env, c);
        return rejected(env, BLZ_ESHUTDOWN);
    }
    c->owner = p;
    c->pool = p->pool;
    napi_value promise;
    if (napi_create_promise(env, &c->deferred, &promise) != napi_ok ||
        napi_create_reference(env, handle, 1, &c->handle) != napi_ok) {
        if (c->deferred) {
            napi_value unused;
            napi_get_undefined(env, &unused);
            napi_reject_deferred(env, c->deferred, unused); /* frees it; the promise is never returned */
        }
        free_call(env, c);
        throw_napi_failure(env, napi_generic_failure, "submit");
        return NULL;
    }
    if (!is_undefined_or_null(env, token)) {
        /* Tagging fails on an object tagged before: a token serves one call. */
        if (napi_type_tag_object(env, token, &TOKEN_TAG) != napi_ok ||
            napi_wrap(env, token, c, NULL, NULL, NULL) != napi_ok ||
            napi_create_reference(env, token, 1, &c->token) != napi_ok) {
            /* A token already in use, or not an object: index.js never does that. */
            napi_value unused;
            napi_get_undefined(env, &unused);
            napi_reject_deferred(env, c->deferred, unused);
            free_call(env, c);
            napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", "bad cancel token");
            return NULL;
        }
    }
    /* In flight before the spawn: on_done may run before blz_spawn_ex
     * returns, but deliver runs on this thread, after this function. */
    c->next = p->calls;
    if (p->calls) p->calls->prev = c;
    p->calls = c;
    if (p->in_flight++ == 0) napi_ref_threadsafe_function(env, p->tsfn);

    /* DONE_AFTER_FINISH: the handle can be joined as soon as the call is
     * on the done list. CANCEL_ON_FAILURE: a kernel's first failing piece
     * stops the rest of its loop (fail-fast, index.js's promise). */
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.flags = BLZ_SPAWN_DONE_AFTER_FINISH | BLZ_SPAWN_CANCEL_ON_FAILURE;
    opts.on_done = call_done;
    opts.done_arg = c;
    blz_status s = blz_spawn_ex(p->pool, call_task, c, &opts, &c->task);
    if (s != BLZ_OK) {
        /* on_done will not run: the call is still ours alone (and c->task untouched: NULL). */
        unlink_call(p, c);
        if (p->in_flight == 0) napi_unref_threadsafe_function(env, p->tsfn);
        napi_value error = status_error(env, s);
        if (error) napi_reject_deferred(env, c->deferred, error);
        free_call(env, c);
    }
    /* After BLZ_OK only the loop-thread fields of c may be touched, and
     * only from deliver/settle/cancel: the worker writes the others. */
    return promise;
}

static call_ctx *new_call(napi_env env, int kind) {
    call_ctx *c = calloc(1, sizeof *c);
    if (!c) throw_status(env, BLZ_ENOMEM);
    if (c) {
        c->kind = kind;
        c->result_kind = RESULT_CRCS;
    }
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

/* ---- exported functions (called by index.js) ---- */

#define GET_ARGS(n)                                                                           \
    size_t argc = (n);                                                                        \
    napi_value argv[(n) > 0 ? (n) : 1];                                                       \
    CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));                    \
    if (argc < (n)) {                                                                         \
        napi_throw_type_error(env, "ERR_MISSING_ARGS", "missing arguments");                  \
        return NULL;                                                                          \
    }

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

/*
 * The buffers of a crc32 call, into spans: each element of the caller's
 * list is read once (an index getter runs once here, and what it returns
 * is what is used) and its memory taken at once, before the next read can
 * run JavaScript. NULL with an exception pending; m then holds what was
 * taken so far, for the caller to free.
 */
static byte_span *read_buffers(napi_env env, napi_value list, call_memory *m, size_t *count) {
    bool is_array = false;
    if (napi_is_array(env, list, &is_array) != napi_ok || !is_array) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "buffers must be an array");
        return NULL;
    }
    uint32_t n;
    if (napi_get_array_length(env, list, &n) != napi_ok) return NULL;
    byte_span *spans = malloc((n ? n : 1) * sizeof *spans);
    if (!spans) {
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    for (uint32_t i = 0; i < n; ++i) {
        napi_value item;
        js_bytes b;
        char what[48];
        snprintf(what, sizeof what, "buffers[%u]", i);
        if (napi_get_element(env, list, i, &item) != napi_ok || !get_bytes(env, item, &b, what) ||
            !take_bytes(env, m, &b, true, &spans[i])) {
            free(spans);
            return NULL;
        }
    }
    *count = n;
    return spans;
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

/* ---- the same CRC kernel on libuv's threadpool, for the comparison ---- */

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
    CHECK_NAPI(env, napi_create_string_utf8(env, status_name(s), NAPI_AUTO_LENGTH, &v));
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
        {"uvCrc32", js_uv_crc32},
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
