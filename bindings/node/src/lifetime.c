/*
 * libblitz for Node.js, the lifetime core (lifetime.h): pools, the
 * submission of calls, their completion (on_done, the threadsafe
 * function, settle), cancel and close, and the env's teardown. addon.c
 * lists the other files; the calls' builders and tasks are calls.c.
 *
 * index.js validates arguments and wires AbortSignals; the addon owns the
 * native side. docs/embedding.md ("Node.js through Node-API") explains the
 * rules; here is how the addon keeps them, for every file of it.
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
 *    cleanup hook. A default Pool is a reference to the process pool
 *    (blz_pool_shared, 0.3), which other libraries, Pools and
 *    worker_threads share: there blz_pool_destroy only gives the
 *    reference up, without waiting for anything while other references
 *    remain. So nothing relies on destroy to wait for this pool's calls:
 *    `unfinished` counts the accepted calls whose on_done has not yet put
 *    them on the done list (under the lock), and the teardown waits until
 *    it is 0 (finished_all) before it gives the pool up. An on_done's last
 *    touch of the pool_ctx is its unlock, which the waiter's lock follows.
 *  - A call's task handle (call_ctx.task): no worker touches it. It is
 *    written by blz_spawn_ex (submit) on the loop thread and used only
 *    there, only while it is valid, that is until the blz_join that frees
 *    it, after which the field is NULL: by cancel(token), which reaches the
 *    call through the token's wrap and calls blz_task_cancel if the field
 *    is set (the wrap is removed when the call is freed, right after the
 *    join); by the env teardown, which cancels the task of every call
 *    still in flight; and by the one blz_join, made by settle when the
 *    loop took the call from the done list, or by the teardown after
 *    blz_pool_destroy returned. The task is spawned with
 *    BLZ_SPAWN_DONE_AFTER_FINISH, so its on_done runs only once it has
 *    finished: that join returns its status at once and the loop never
 *    waits for a worker. There is no group per
 *    call: BLZ_SPAWN_CANCEL_ON_FAILURE gives the task itself the
 *    fail-fast a BLZ_GROUP_CANCEL_ON_FAILURE group gave it (a kernel's
 *    first failing piece stops the rest of its loop).
 *  - Native functions looked up by name (native.c): their library stays
 *    loaded for the life of the process, so no pointer a queued task
 *    holds can dangle.
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
#include "lifetime.h"

#include <pthread.h>

typedef struct env_data env_data;

/* Per env (main thread, each worker_thread): instance data, loop thread only. */
typedef struct event_ctx event_ctx;

struct env_data {
    pool_ctx *pools; /* pools not yet destroyed */
    event_ctx *events; /* events not yet closed */
    bool torn_down;  /* the cleanup hook ran: no new pool */
};

/* One Pool: its blz_pool, the tsfn that wakes the loop, the calls in flight. */
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
    size_t unfinished;        /* accepted calls whose on_done has not queued them yet */
    pthread_cond_t finished_all; /* broadcast when unfinished drops to 0 */
};

/* env_data with its env: the cleanup hook gets only the pointer it was
 * registered with, and freeing the calls' references needs the env. */
typedef struct env_box {
    env_data data;
    napi_env env;
} env_box;

/* The type tags of the handles index.js is handed. */
static const napi_type_tag POOL_TAG = {0x626c69747a2d6e6fULL, 0x64652d706f6f6c31ULL};
/* A cancel token: a fresh object per call, tagged and wrapped by submit. */
static const napi_type_tag TOKEN_TAG = {0x626c69747a2d6e6fULL, 0x64652d746f6b3031ULL};

/* finish_close is called by deliver, before its definition. */
static void finish_close(napi_env env, pool_ctx *p);

/* ---- pool_ctx ownership ---- */

static void pool_unref(pool_ctx *p) {
    if (--p->refs > 0) return;
    pthread_cond_destroy(&p->finished_all);
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
void free_call(napi_env env, call_ctx *c) {
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
    call_free_args(c);
    free(c);
}

static void unlink_call(pool_ctx *p, call_ctx *c) {
    if (c->prev) c->prev->next = c->next; else p->calls = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    p->in_flight--;
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
    if (--p->unfinished == 0) pthread_cond_broadcast(&p->finished_all);
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
    /* An abort that came after the kernel finished but before this settle
     * still aborts the call (index.js rejects it with AbortError): so the
     * copy is not written back as a success's, and a plain output stays as
     * it was, the rule every aborted call keeps. */
    if (s == BLZ_OK && c->cancelled) s = BLZ_ECANCELED;
    bool delivered = deliver_copy(env, c, s);
    napi_value value = NULL;
    if (s == BLZ_OK && delivered) {
        value = call_result(env, c);
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

/* Frees the blz_pool and gives up the tsfn; a pending close() resolves. */
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
     * the cleanup hook has destroyed the pool already). A close() pending
     * with nothing in flight cannot be (finish_close runs when the last
     * call settles); finish_close would resolve it. */
    finish_close(env, p);
    if (p->close_promise) {
        napi_delete_reference(env, p->close_promise);
        p->close_promise = NULL;
    }
    pool_unref(p);
}

/* ---- env teardown ---- */

/* Waits until every accepted call's on_done has queued it (loop thread):
 * then no worker touches p or a call any more, whether or not destroying
 * the blz_pool waits (it does not for a process pool others still hold). */
static void wait_for_every_on_done(pool_ctx *p) {
    pthread_mutex_lock(&p->lock);
    while (p->unfinished > 0) pthread_cond_wait(&p->finished_all, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void teardown_pool(napi_env env, pool_ctx *p) {
    /* Skip what has not started; built-in kernels stop at their next check. */
    for (call_ctx *c = p->calls; c; c = c->next)
        if (c->task) blz_task_cancel(c->task);
    /* Waits for the kernels still running (they may use V8's heap, which
     * Node frees after this hook) and for every on_done; then the pool (or
     * our reference to the process pool) is given up. */
    wait_for_every_on_done(p);
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

static void destroy_event(event_ctx *ev);

static void env_cleanup(void *arg) {
    env_data *ed = arg;
    ed->torn_down = true;
    napi_env env = ((env_box *)ed)->env;
    /* Events first: a call waiting for an event nobody will set now is
     * cancelled (blz_event_destroy of an unset event), so that the pools'
     * teardown, which waits for every call's on_done, does not wait for ever. */
    while (ed->events) destroy_event(ed->events);
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

bool lifetime_init_env(napi_env env) {
    env_box *box = calloc(1, sizeof *box);
    if (!box) {
        throw_status(env, BLZ_ENOMEM);
        return false;
    }
    box->env = env;
    if (napi_set_instance_data(env, &box->data, env_data_finalize, NULL) != napi_ok) {
        free(box);
        throw_napi_failure(env, napi_generic_failure, "napi_set_instance_data");
        return false;
    }
    /* Registered before any pool's tsfn exists: hooks run last-in first-out,
     * so at teardown this runs after the tsfns' hooks (which only mark them
     * closing) and before Node deletes them or the env. */
    if (napi_add_env_cleanup_hook(env, env_cleanup, &box->data) != napi_ok) {
        throw_napi_failure(env, napi_generic_failure, "napi_add_env_cleanup_hook");
        return false;
    }
    return true;
}

/* ---- submission ---- */

napi_value rejected(napi_env env, blz_status s) {
    napi_deferred d;
    napi_value promise;
    CHECK_NAPI(env, napi_create_promise(env, &d, &promise));
    napi_value error = status_error(env, s);
    if (!error) return NULL;
    CHECK_NAPI(env, napi_reject_deferred(env, d, error));
    return promise;
}

bool accepting(const pool_ctx *p) { return p->pool && !p->closing; }

/*
 * Spawns call c of pool p; handle is the pool's JS handle, token (or
 * undefined) becomes its cancel handle. Takes ownership of c on every
 * path. Returns the promise, or NULL with an exception pending.
 */
napi_value submit(napi_env env, pool_ctx *p, call_ctx *c, napi_value handle, napi_value token,
                  blz_event *const *after, size_t num_after) {
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
    pthread_mutex_lock(&p->lock);
    p->unfinished++; /* before the spawn: on_done may come before it returns */
    pthread_mutex_unlock(&p->lock);

    /* DONE_AFTER_FINISH: the handle can be joined as soon as the call is
     * on the done list. CANCEL_ON_FAILURE: a kernel's first failing piece
     * stops the rest of its loop (fail-fast, index.js's promise). */
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.flags = BLZ_SPAWN_DONE_AFTER_FINISH | BLZ_SPAWN_CANCEL_ON_FAILURE;
    opts.on_done = call_done;
    opts.done_arg = c;
    /* 0.3: queued once every event is set (each set from this thread, or
     * closed: BLZ_ECANCELED, which cancels the call). The handles are
     * read during the spawn only; no JavaScript runs before it. */
    opts.after_events = after;
    opts.num_after_events = num_after;
    blz_status s = blz_spawn_ex(p->pool, call_task, c, &opts, &c->task);
    if (s != BLZ_OK) {
        /* on_done will not run: the call is still ours alone (and c->task untouched: NULL). */
        pthread_mutex_lock(&p->lock);
        p->unfinished--;
        pthread_mutex_unlock(&p->lock);
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

pool_ctx *unwrap_pool(napi_env env, napi_value handle) {
    return unwrap_tagged(env, handle, &POOL_TAG, "not a libblitz pool handle");
}

/* ---- the pool functions index.js calls ---- */

/* createPool(threads, shared) -> handle: shared, a reference to the
 * process pool (blz_pool_shared; threads 0: whatever size it has, else it
 * must have that many, or BLZ_EINVAL); else a pool of its own. */
static napi_value js_create_pool(napi_env env, napi_callback_info info) {
    GET_ARGS(2);
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
    bool shared = false;
    if (napi_get_value_bool(env, argv[1], &shared) != napi_ok) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "shared must be a boolean");
        return NULL;
    }
    pool_ctx *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    if (pthread_cond_init(&p->finished_all, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = threads;
    blz_status s;
    if (shared) {
        s = blz_pool_shared(&config, &p->pool); /* names and sizes are the creator's */
    } else {
        config.thread_name = "blz-node";
        s = blz_pool_create(&config, &p->pool);
    }
    if (s != BLZ_OK) {
        pthread_cond_destroy(&p->finished_all);
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
        pthread_cond_destroy(&p->finished_all);
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
    GET_POOL_ARGS(1);
    napi_value v;
    CHECK_NAPI(env, napi_create_uint32(env, p->threads, &v));
    return v;
}

/* cancel(token): cancels the call's task; a settled call's token is unwrapped: no-op. */
static napi_value js_cancel(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    void *c = NULL;
    bool tagged = false;
    napi_valuetype t;
    /* The handle is valid while c->task is set: the join that frees it
     * (settle, teardown: this thread) clears the field, and the token stays
     * wrapped only until the call is freed, right after; settling may run
     * JavaScript (a `then` getter) in between, which finds the field NULL. */
    if (napi_typeof(env, argv[0], &t) == napi_ok && t == napi_object &&
        napi_check_object_type_tag(env, argv[0], &TOKEN_TAG, &tagged) == napi_ok && tagged &&
        napi_unwrap(env, argv[0], &c) == napi_ok && c && ((call_ctx *)c)->task) {
        ((call_ctx *)c)->cancelled = true;
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
    GET_POOL_ARGS(1);
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
    GET_POOL_ARGS(1);
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

/* ---- events (0.3): completions set from JavaScript ----
 *
 * An Event's blz_event is used on its env's loop thread only (set, close,
 * the spawns that name it): no call on it can overlap its destroy, which
 * close(), the wrapper's finalizer or the env's teardown makes, once
 * (the field is cleared first). An event destroyed unset completes with
 * BLZ_ECANCELED, cancelling the calls that wait for it. */
struct event_ctx {
    blz_event *event;        /* NULL once destroyed */
    env_data *ed;            /* NULL once unlinked */
    event_ctx *prev, *next;  /* the env's list */
};

static const napi_type_tag EVENT_TAG = {0x626c69747a2d6e6fULL, 0x64652d6576656e31ULL};

static void destroy_event(event_ctx *ev) {
    blz_event *event = ev->event;
    ev->event = NULL;
    if (event) blz_event_destroy(event);
    if (!ev->ed) return;
    if (ev->prev) ev->prev->next = ev->next; else ev->ed->events = ev->next;
    if (ev->next) ev->next->prev = ev->prev;
    ev->prev = ev->next = NULL;
    ev->ed = NULL;
}

static void event_finalize(napi_env env, void *data, void *hint) {
    (void)env;
    (void)hint;
    destroy_event(data);
    free(data);
}

static event_ctx *unwrap_event(napi_env env, napi_value handle) {
    return unwrap_tagged(env, handle, &EVENT_TAG, "not a libblitz event handle");
}

/* createEvent() -> handle */
static napi_value js_create_event(napi_env env, napi_callback_info info) {
    (void)info;
    env_data *ed = get_env_data(env);
    if (!ed || ed->torn_down) {
        napi_throw_error(env, "BLZ_ESHUTDOWN", "libblitz: the environment is shutting down");
        return NULL;
    }
    event_ctx *ev = calloc(1, sizeof *ev);
    if (!ev) {
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    blz_status s = blz_event_create(&ev->event);
    if (s != BLZ_OK) {
        free(ev);
        throw_status(env, s);
        return NULL;
    }
    napi_value handle;
    if (napi_create_object(env, &handle) != napi_ok || napi_wrap(env, handle, ev, event_finalize, NULL, NULL) != napi_ok) {
        blz_event_destroy(ev->event);
        free(ev);
        throw_napi_failure(env, napi_generic_failure, "creating an event handle");
        return NULL;
    }
    napi_type_tag_object(env, handle, &EVENT_TAG);
    ev->ed = ed;
    ev->next = ed->events;
    if (ed->events) ed->events->prev = ev;
    ed->events = ev;
    return handle;
}

/* setEvent(handle, status): BLZ_OK, BLZ_ETASK or BLZ_ECANCELED; throws
 * BLZ_EINVAL on a second set, another status or a closed event. */
static napi_value js_set_event(napi_env env, napi_callback_info info) {
    GET_ARGS(2);
    event_ctx *ev = unwrap_event(env, argv[0]);
    if (!ev) return NULL;
    int32_t status;
    if (napi_get_value_int32(env, argv[1], &status) != napi_ok) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "status must be a number");
        return NULL;
    }
    blz_status s = ev->event ? blz_event_set(ev->event, status) : BLZ_EINVAL;
    if (s != BLZ_OK) throw_status(env, s);
    return NULL;
}

/* closeEvent(handle): idempotent. */
static napi_value js_close_event(napi_env env, napi_callback_info info) {
    GET_ARGS(1);
    event_ctx *ev = unwrap_event(env, argv[0]);
    if (ev) destroy_event(ev);
    return NULL;
}

bool after_events(napi_env env, napi_value after, blz_event ***out, size_t *count) {
    *out = NULL;
    *count = 0;
    if (is_undefined_or_null(env, after)) return true;
    uint32_t n = 0;
    bool is_array = false;
    if (napi_is_array(env, after, &is_array) != napi_ok || !is_array ||
        napi_get_array_length(env, after, &n) != napi_ok) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "after must be an array");
        return false;
    }
    if (n == 0) return true;
    blz_event **list = malloc(n * sizeof *list);
    if (!list) {
        throw_status(env, BLZ_ENOMEM);
        return false;
    }
    for (uint32_t i = 0; i < n; ++i) {
        napi_value element;
        if (napi_get_element(env, after, i, &element) != napi_ok) {
            free(list);
            throw_napi_failure(env, napi_generic_failure, "reading after");
            return false;
        }
        event_ctx *ev = unwrap_event(env, element); /* a TypeError pending when not an event */
        if (!ev || !ev->event) {
            free(list);
            if (ev) napi_throw_error(env, "BLZ_EINVAL", "libblitz: an event in `after` is closed");
            return false;
        }
        list[i] = ev->event;
    }
    *out = list;
    *count = n;
    return true;
}

const js_export lifetime_exports[] = {
    {"createEvent", js_create_event},
    {"setEvent", js_set_event},
    {"closeEvent", js_close_event},
    {"createPool", js_create_pool},
    {"poolThreads", js_pool_threads},
    {"cancel", js_cancel},
    {"stats", js_stats},
    {"close", js_close},
    {NULL, NULL},
};
