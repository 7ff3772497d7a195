/*
 * libblitz for Node.js, the lifetime core: pools, calls, their completion
 * and the env's teardown (addon.h lists the other files).
 *
 * index.js validates arguments and wires AbortSignals; the addon owns the
 * native side. docs/embedding.md ("Node.js through Node-API") explains the
 * rules; here is how the addon keeps them.
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
#include "addon.h"

/* ---- pool_ctx ownership ---- */

void pool_unref(pool_ctx *p) {
    if (--p->refs > 0) return;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void unlink_pool(pool_ctx *p) {
    if (!p->ed) return;
    if (p->prev) p->prev->next = p->next; else p->ed->pools = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->ed = NULL;
}

/* Our last use of the tsfn: Node finalizes it (tsfn_finalized) once the
 * wake-up it may still hold was dispatched. */
void release_tsfn(pool_ctx *p) {
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
void join_task(call_ctx *c) {
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
    if (c->kind == CALL_CRC32) {
        free(c->u.crc.spans);
        free(c->u.crc.out);
    } else if (c->kind == CALL_SORT) {
        free(c->u.sort.tmp);
    }
    free(c);
}

void unlink_call(pool_ctx *p, call_ctx *c) {
    if (c->prev) c->prev->next = c->next; else p->calls = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    p->in_flight--;
}

void finish_close(napi_env env, pool_ctx *p);
void crc_pieces(void *arg, size_t lo, size_t hi);
void map_pieces(void *arg, size_t lo, size_t hi);

/* Runs on a worker: the task of every call. */
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

/* CRC pieces: one buffer per index. Long buffers are hashed in 256 KiB
 * steps with a cancellation check between steps, so that an abort (or an
 * env teardown) is not held up by one huge buffer. */
void crc_pieces(void *arg, size_t lo, size_t hi) {
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

void map_pieces(void *arg, size_t lo, size_t hi) {
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
void call_done(void *done_arg, blz_status status) {
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

napi_value make_result(napi_env env, call_ctx *c) {
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
bool deliver_copy(napi_env env, call_ctx *c, blz_status s) {
    if (!c->back.data || !(s == BLZ_OK || (c->back_on_failure && c->ran))) return true;
    napi_value target;
    return napi_get_reference_value(env, c->result, &target) == napi_ok && target &&
           write_back(env, target, c->back);
}

/* Settles one finished call and frees it (loop thread). The copy is
 * written back before the promise is settled: resolving may run
 * JavaScript (a `then` getter on the result), which could detach it. */
void settle(napi_env env, pool_ctx *p, call_ctx *c) {
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
void deliver(napi_env env, napi_value js_cb, void *context, void *data) {
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
void tsfn_finalized(napi_env env, void *data, void *hint) {
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
void destroy_idle_pool(pool_ctx *p) {
    if (!p->pool) return;
    /* No accepted work is left (every call was settled), so this only
     * waits for the last on_done to return and joins the idle workers. */
    blz_pool_destroy(p->pool);
    p->pool = NULL;
    unlink_pool(p);
}

/* Frees the blz_pool and gives up the tsfn; a pending close() resolves. */
void finish_close(napi_env env, pool_ctx *p) {
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
void pool_handle_finalize(napi_env env, void *data, void *hint) {
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

void teardown_pool(napi_env env, pool_ctx *p) {
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


void env_cleanup(void *arg) {
    env_data *ed = arg;
    ed->torn_down = true;
    napi_env env = ((env_box *)ed)->env;
    while (ed->pools) teardown_pool(env, ed->pools);
}

void env_data_finalize(napi_env env, void *data, void *hint) {
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

env_data *get_env_data(napi_env env) {
    void *data = NULL;
    if (napi_get_instance_data(env, &data) != napi_ok) return NULL;
    return data;
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

/* Whether p takes new calls: checked before any copy is made, and again at
 * the spawn (reading a crc32 list can run JavaScript that closes the pool). */
bool accepting(const pool_ctx *p) { return p->pool && !p->closing; }

/*
 * Spawns call c of pool p; handle is the pool's JS handle, token (or
 * undefined) becomes its cancel handle. Takes ownership of c on every
 * path. Returns the promise, or NULL with an exception pending.
 */
napi_value submit(napi_env env, pool_ctx *p, call_ctx *c, napi_value handle, napi_value token) {
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

call_ctx *new_call(napi_env env, int kind) {
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
bool set_result(napi_env env, call_ctx *c, napi_value v) {
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
bool take_arg(napi_env env, call_ctx *c, napi_value arg, const js_bytes *b, void **data) {
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
bool read_arg(napi_env env, napi_value arg, js_bytes *b, const js_bytes **out) {
    *out = NULL;
    if (is_undefined_or_null(env, arg)) return true;
    if (!get_bytes(env, arg, b, "arg")) return false;
    *out = b;
    return true;
}

