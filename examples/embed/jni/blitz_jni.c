/*
 * JNI glue: the native methods of BlitzPool.java on a libblitz pool.
 *
 * The JVM rules this file follows (docs/embedding.md explains them):
 *
 *  - A native thread must be attached to the JVM before it calls any JNI
 *    function. The pool's on_thread_start hook attaches each worker once, as
 *    a daemon (the JVM's exit does not wait for it), and on_thread_stop
 *    detaches it after its last job. Between the two, a worker is a Java
 *    thread ("blitz-jni-<index>") that spends its time in native code, where
 *    the garbage collector does not wait for it.
 *  - A JNIEnv belongs to one thread: workers get their own with GetEnv. A
 *    local reference belongs to one thread and one native frame: the caller
 *    hands the callback object to the workers as a global reference. A
 *    worker stays attached for the pool's life and never returns to Java, so
 *    nothing frees its local references for it: each piece of work runs in
 *    its own local frame (PushLocalFrame / PopLocalFrame).
 *  - jmethodIDs are valid on every thread; classes are looked up on the
 *    calling thread (FindClass on an attached native thread sees only the
 *    system class loader).
 *  - An exception thrown by Java code on a worker is pending on that worker
 *    only. The worker takes it (ExceptionOccurred, ExceptionClear), keeps
 *    the first one as a global reference, and the calling thread rethrows it
 *    after blz_parallel_for has returned.
 *  - No array is pinned with GetPrimitiveArrayCritical across the parallel
 *    call: a critical region can hold off the garbage collector, which the
 *    Java code on the workers may need; the input and the output are copied.
 *
 * Futures without a blocked Java thread (submitAsync, sumOfSquaresAsync;
 * libblitz 0.2's completion callback):
 *
 *  - Java makes the CompletableFuture and passes it in. The native method
 *    puts a global reference to it (and to the Supplier, for submitAsync)
 *    into a malloc'ed async_task and spawns the task detached with
 *    blz_spawn_ex (out_task NULL) and on_done = async_done. It returns at
 *    once: no Java thread waits in native code for the result, the caller
 *    chains on the future (thenApply, ...) and joins in Java if it wants.
 *  - Ownership: once blz_spawn_ex returned BLZ_OK, the task belongs to
 *    on_done, which libblitz calls exactly once, and the caller must not
 *    touch it again (on_done may already have freed it before blz_spawn_ex
 *    returns). On any error on_done is never called: the caller frees it
 *    and throws (RejectedExecutionException for BLZ_ESHUTDOWN).
 *  - on_done runs on a worker, so it finds its JNIEnv with GetEnv: the
 *    worker was attached once by on_thread_start, not per completion (an
 *    attach per callback would create and tear down a java.lang.Thread
 *    each time). Should that attach have failed, the first task or on_done
 *    on the worker attaches it (worker_env), and on_thread_stop detaches
 *    it as usual.
 *  - The task (fn) and on_done run on the same worker, one after the
 *    other, when the task ran: the task leaves its result (a global
 *    reference, or the C sum) and its Java exception (a global reference)
 *    in the async_task, and calls blz_fail when it failed. on_done maps the
 *    status it is given: BLZ_OK -> future.complete(result); BLZ_ETASK ->
 *    completeExceptionally(the exception the Supplier threw, or an
 *    IllegalStateException naming the failure); BLZ_ECANCELED (the task's
 *    group was cancelled before it started; it never ran) ->
 *    future.cancel(false), so join() throws CancellationException. A status
 *    that contradicts what the task recorded completes the future with an
 *    IllegalStateException, which the Java test reports.
 *  - future.complete runs the stages already chained on the future
 *    (thenApply ...) right there, on the worker: they are Java code on an
 *    attached thread, like map's lambda. complete* do not throw on their
 *    own; if a JNI call in on_done leaves an exception pending anyway it is
 *    printed and cleared (ExceptionDescribe): nobody else could catch it.
 *    on_done then deletes every global reference of the task, inside its
 *    own local frame, and frees it.
 *  - The classes and method IDs on_done needs are looked up once, in
 *    JNI_OnLoad, on the thread loading the library, and the classes are
 *    kept by global references so that the IDs stay valid everywhere.
 *  - Cancellation: a BlitzPool.Group wraps a blz_group. Group.cancel is
 *    blz_group_cancel: queued tasks of the group are skipped (their on_done
 *    gets BLZ_ECANCELED), and running ones may ask BlitzPool.cancelled()
 *    (blz_cancelled) and stop. CompletableFuture.cancel by a Java caller
 *    does not reach the native task; it only makes on_done's later
 *    complete a no-op.
 *  - blz_pool_destroy (BlitzPool.close) runs or skips every queued task and
 *    calls every on_done before it returns, then on_thread_stop detaches
 *    the workers: after close() every future of the pool is complete and
 *    every global reference deleted. That close is the one place where a
 *    Java thread waits in native code for the tasks.
 */
#include "BlitzPool.h" /* generated by javac -h: the exact native signatures */

#include <blitz.h>
#include <jni.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* What a BlitzPool's long handle points to. */
typedef struct {
    JavaVM *vm;
    blz_pool *pool;
} jni_pool;

/* Workers attached and detached since the library was loaded; read by Java
 * after the pool closed (seq_cst, the default: they are not on a hot path). */
static atomic_int g_attached;
static atomic_int g_detached;

/* This worker's JNIEnv. A worker is attached once, by on_thread_start,
 * and stays attached until on_thread_stop: then this is GetEnv. If that
 * attach failed, this tries again, so that an on_done can still complete
 * its future. NULL if the worker cannot be attached. */
static JNIEnv *worker_env(JavaVM *vm, int32_t worker_index) {
    char name[32];
    JavaVMAttachArgs args;
    JNIEnv *env = NULL;

    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) == JNI_OK) return env;
    snprintf(name, sizeof name, "blitz-jni-%d", (int)worker_index);
    args.version = JNI_VERSION_1_8;
    args.name = name;
    args.group = NULL;
    if ((*vm)->AttachCurrentThreadAsDaemon(vm, (void **)&env, &args) != JNI_OK) return NULL;
    atomic_fetch_add(&g_attached, 1);
    return env;
}

/* on_thread_start: make this worker a (daemon) Java thread. */
static void attach_worker(void *user, uint32_t worker_index) {
    jni_pool *p = (jni_pool *)user;
    /* A failure leaves the worker unattached: its map jobs find no JNIEnv
     * (map_range); its async tasks and on_done try to attach it again
     * (worker_env). */
    (void)worker_env(p->vm, (int32_t)worker_index);
}

/* on_thread_stop: after the worker's last job, before its thread ends. */
static void detach_worker(void *user, uint32_t worker_index) {
    jni_pool *p = (jni_pool *)user;
    JNIEnv *env = NULL;
    (void)worker_index;
    if ((*p->vm)->GetEnv(p->vm, (void **)&env, JNI_VERSION_1_8) == JNI_OK &&
        (*p->vm)->DetachCurrentThread(p->vm) == JNI_OK) {
        atomic_fetch_add(&g_detached, 1);
    }
}

static void throw_new(JNIEnv *env, const char *class_name, const char *message) {
    jclass cls = (*env)->FindClass(env, class_name);
    if (cls != NULL) (*env)->ThrowNew(env, cls, message);
}

static jni_pool *pool_of(jlong handle) { return (jni_pool *)(intptr_t)handle; }

JNIEXPORT jlong JNICALL Java_BlitzPool_create(JNIEnv *env, jclass cls, jint threads) {
    blz_pool_config config;
    blz_status status;
    jni_pool *p;
    (void)cls;

    if (threads < 0) {
        throw_new(env, "java/lang/IllegalArgumentException", "threads < 0");
        return 0;
    }
    p = (jni_pool *)calloc(1, sizeof *p);
    if (p == NULL || (*env)->GetJavaVM(env, &p->vm) != JNI_OK) {
        free(p);
        throw_new(env, "java/lang/OutOfMemoryError", "blitz_jni: no memory");
        return 0;
    }
    blz_pool_config_init(&config);
    config.num_threads = (uint32_t)threads;
    config.thread_name = "blitz-jni";
    config.on_thread_start = attach_worker;
    config.on_thread_stop = detach_worker;
    config.user = p; /* outlives the pool: freed after blz_pool_destroy */
    status = blz_pool_create(&config, &p->pool);
    if (status != BLZ_OK) {
        free(p);
        throw_new(env, "java/lang/IllegalStateException", blz_status_string(status));
        return 0;
    }
    return (jlong)(intptr_t)p;
}

JNIEXPORT void JNICALL Java_BlitzPool_destroy(JNIEnv *env, jclass cls, jlong handle) {
    jni_pool *p = pool_of(handle);
    blz_status status;
    (void)cls;
    /* Blocks in native code: the workers detach meanwhile. */
    status = blz_pool_destroy(p->pool);
    if (status == BLZ_EDEADLK) { /* called from one of its own workers */
        throw_new(env, "java/lang/IllegalStateException", blz_status_string(status));
        return;
    }
    free(p);
}

JNIEXPORT jint JNICALL Java_BlitzPool_threadsNative(JNIEnv *env, jclass cls, jlong handle) {
    (void)env;
    (void)cls;
    return (jint)blz_pool_num_threads(pool_of(handle)->pool);
}

/* ---- map: a Java LongUnaryOperator called on the workers ---------------- */

typedef struct {
    JavaVM *vm;
    jobject fn;        /* global reference: usable on every thread */
    jmethodID apply;   /* LongUnaryOperator.applyAsLong(long) */
    const jlong *in;
    jlong *out;
    atomic_int failed; /* 0 -> 1 once, by compare-exchange: its winner alone writes error */
    jthrowable error;  /* global reference to the first exception, or NULL */
    int not_attached;  /* a worker had no JNIEnv (its attach failed) */
} map_job;

/* A piece failed: with env, by the Java exception pending on this worker,
 * which is taken and cleared (no JNI call is legal while one is pending);
 * without env, because the worker is not attached. The first failure is
 * kept for the caller; the others are dropped. */
static void record_failure(map_job *m, JNIEnv *env) {
    jthrowable e = env != NULL ? (*env)->ExceptionOccurred(env) : NULL;
    int expected = 0;
    if (e != NULL) (*env)->ExceptionClear(env);
    if (atomic_compare_exchange_strong(&m->failed, &expected, 1)) {
        if (e != NULL) m->error = (jthrowable)(*env)->NewGlobalRef(env, e);
        else m->not_attached = 1;
    }
    if (e != NULL) (*env)->DeleteLocalRef(env, e);
}

static void map_range(void *arg, size_t begin, size_t end) {
    map_job *m = (map_job *)arg;
    JNIEnv *env = NULL;
    size_t i;

    if ((*m->vm)->GetEnv(m->vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) {
        record_failure(m, NULL);
        return;
    }
    if ((*env)->PushLocalFrame(env, 8) != 0) { /* OutOfMemoryError pending */
        record_failure(m, env);
        return;
    }
    /* relaxed: only a hint to stop early; error itself is read by the caller
     * after blz_parallel_for returned, which orders every piece before it. */
    for (i = begin; i < end && atomic_load_explicit(&m->failed, memory_order_relaxed) == 0; ++i) {
        jlong r = (*env)->CallLongMethod(env, m->fn, m->apply, m->in[i]);
        if ((*env)->ExceptionCheck(env)) {
            record_failure(m, env);
            break;
        }
        m->out[i] = r;
    }
    (*env)->PopLocalFrame(env, NULL); /* frees every local reference made above */
}

JNIEXPORT jlongArray JNICALL Java_BlitzPool_mapNative(JNIEnv *env, jclass cls, jlong handle,
                                                      jlongArray input, jobject fn, jint grain) {
    jni_pool *p = pool_of(handle);
    map_job m;
    jclass op;
    jsize n;
    jlong *in, *out;
    jlongArray result = NULL;
    blz_status status;
    (void)cls;

    if (input == NULL || fn == NULL) {
        throw_new(env, "java/lang/NullPointerException", "input and f must not be null");
        return NULL;
    }
    if (grain < 0) {
        throw_new(env, "java/lang/IllegalArgumentException", "grain < 0");
        return NULL;
    }
    op = (*env)->FindClass(env, "java/util/function/LongUnaryOperator");
    if (op == NULL) return NULL;
    n = (*env)->GetArrayLength(env, input);
    in = (jlong *)malloc(sizeof(jlong) * ((size_t)n + 1u));
    out = (jlong *)malloc(sizeof(jlong) * ((size_t)n + 1u));
    if (in == NULL || out == NULL) {
        free(in);
        free(out);
        throw_new(env, "java/lang/OutOfMemoryError", "blitz_jni: no memory");
        return NULL;
    }
    (*env)->GetLongArrayRegion(env, input, 0, n, in);

    m.vm = p->vm;
    m.apply = (*env)->GetMethodID(env, op, "applyAsLong", "(J)J");
    m.fn = (*env)->NewGlobalRef(env, fn);
    m.in = in;
    m.out = out;
    atomic_init(&m.failed, 0);
    m.error = NULL;
    m.not_attached = 0;
    if (m.apply == NULL || m.fn == NULL) { /* an exception is pending */
        if (m.fn != NULL) (*env)->DeleteGlobalRef(env, m.fn);
        free(in);
        free(out);
        return NULL;
    }

    /* This thread is not a worker: the loop moves into the pool and this
     * thread blocks, in native code, until every piece has run. */
    status = blz_parallel_for(p->pool, 0, (size_t)n, (size_t)grain, map_range, &m);
    (*env)->DeleteGlobalRef(env, m.fn);

    if (m.error != NULL) {
        jthrowable e = (jthrowable)(*env)->NewLocalRef(env, m.error);
        (*env)->DeleteGlobalRef(env, m.error);
        (*env)->Throw(env, e);
    } else if (m.not_attached) {
        throw_new(env, "java/lang/IllegalStateException", "a worker is not attached to the JVM");
    } else if (status != BLZ_OK) {
        throw_new(env, "java/lang/IllegalStateException", blz_status_string(status));
    } else {
        result = (*env)->NewLongArray(env, n);
        if (result != NULL) (*env)->SetLongArrayRegion(env, result, 0, n, out);
    }
    free(in);
    free(out);
    return result;
}

/* ---- sumOfSquares: a parallel computation that stays in C --------------- */

static void squares_range(void *arg, size_t begin, size_t end) {
    _Atomic uint64_t *total = (_Atomic uint64_t *)arg;
    uint64_t sum = 0;
    size_t i;
    for (i = begin; i < end; ++i) sum += (uint64_t)i * (uint64_t)i;
    /* relaxed: a sum read only after blz_parallel_for returned, which orders every piece before it */
    atomic_fetch_add_explicit(total, sum, memory_order_relaxed);
}

JNIEXPORT jlong JNICALL Java_BlitzPool_sumOfSquaresNative(JNIEnv *env, jclass cls, jlong handle,
                                                          jlong n) {
    _Atomic uint64_t total;
    blz_status status;
    (void)cls;
    if (n < 0) {
        throw_new(env, "java/lang/IllegalArgumentException", "n < 0");
        return 0;
    }
    atomic_init(&total, 0);
    status = blz_parallel_for(pool_of(handle)->pool, 0, (size_t)n, 0, squares_range, &total);
    if (status != BLZ_OK) {
        throw_new(env, "java/lang/IllegalStateException", blz_status_string(status));
        return 0;
    }
    /* Java's long arithmetic wraps modulo 2^64 as uint64_t does. */
    return (jlong)atomic_load(&total);
}

JNIEXPORT jint JNICALL Java_BlitzPool_attachedCount(JNIEnv *env, jclass cls) {
    (void)env;
    (void)cls;
    return atomic_load(&g_attached);
}

JNIEXPORT jint JNICALL Java_BlitzPool_detachedCount(JNIEnv *env, jclass cls) {
    (void)env;
    (void)cls;
    return atomic_load(&g_detached);
}

/* ---- futures: CompletableFutures completed by on_done ------------------- */

/* The classes and methods on_done and the tasks call, looked up once in
 * JNI_OnLoad. The global references keep the classes (and so the IDs)
 * valid on every thread; a worker's FindClass would also cost a lookup per
 * completion. Written before any Java code can call a native method of
 * this library, read-only afterwards. */
static struct {
    jclass future;          /* java.util.concurrent.CompletableFuture */
    jmethodID complete;     /* boolean complete(Object) */
    jmethodID complete_exceptionally; /* boolean completeExceptionally(Throwable) */
    jmethodID cancel;       /* boolean cancel(boolean) */
    jclass supplier;        /* java.util.function.Supplier */
    jmethodID get;          /* Object get() */
    jclass boxed_long;      /* java.lang.Long */
    jmethodID long_value_of; /* static Long valueOf(long) */
    jclass illegal_state;   /* java.lang.IllegalStateException */
    jmethodID illegal_state_init; /* <init>(String) */
} g_java;

/* on_done calls since the library was loaded, by the status they got, and
 * async tasks accepted whose on_done has not finished yet. */
static atomic_long g_done_ok;
static atomic_long g_done_failed;
static atomic_long g_done_cancelled;
static atomic_long g_async_pending;

/* A global reference to a class, or NULL with an exception pending. */
static jclass global_class(JNIEnv *env, const char *name) {
    jclass local = (*env)->FindClass(env, name);
    jclass global;
    if (local == NULL) return NULL;
    global = (jclass)(*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    if (global == NULL && !(*env)->ExceptionCheck(env)) {
        throw_new(env, "java/lang/OutOfMemoryError", "blitz_jni: no memory for a global reference");
    }
    return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    JNIEnv *env = NULL;
    (void)reserved;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
    /* Each step runs only if the previous ones succeeded (no JNI call with
     * an exception pending); on a failure loadLibrary throws. */
    if ((g_java.future = global_class(env, "java/util/concurrent/CompletableFuture")) == NULL ||
        (g_java.complete = (*env)->GetMethodID(env, g_java.future, "complete",
                                               "(Ljava/lang/Object;)Z")) == NULL ||
        (g_java.complete_exceptionally = (*env)->GetMethodID(
             env, g_java.future, "completeExceptionally", "(Ljava/lang/Throwable;)Z")) == NULL ||
        (g_java.cancel = (*env)->GetMethodID(env, g_java.future, "cancel", "(Z)Z")) == NULL ||
        (g_java.supplier = global_class(env, "java/util/function/Supplier")) == NULL ||
        (g_java.get = (*env)->GetMethodID(env, g_java.supplier, "get", "()Ljava/lang/Object;")) ==
            NULL ||
        (g_java.boxed_long = global_class(env, "java/lang/Long")) == NULL ||
        (g_java.long_value_of = (*env)->GetStaticMethodID(env, g_java.boxed_long, "valueOf",
                                                          "(J)Ljava/lang/Long;")) == NULL ||
        (g_java.illegal_state = global_class(env, "java/lang/IllegalStateException")) == NULL ||
        (g_java.illegal_state_init = (*env)->GetMethodID(env, g_java.illegal_state, "<init>",
                                                         "(Ljava/lang/String;)V")) == NULL) {
        return JNI_ERR;
    }
    return JNI_VERSION_1_8;
}

/* Only for a library loaded by a class loader that gets collected. */
JNIEXPORT void JNICALL JNI_OnUnload(JavaVM *vm, void *reserved) {
    JNIEnv *env = NULL;
    (void)reserved;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return;
    if (g_java.future != NULL) (*env)->DeleteGlobalRef(env, g_java.future);
    if (g_java.supplier != NULL) (*env)->DeleteGlobalRef(env, g_java.supplier);
    if (g_java.boxed_long != NULL) (*env)->DeleteGlobalRef(env, g_java.boxed_long);
    if (g_java.illegal_state != NULL) (*env)->DeleteGlobalRef(env, g_java.illegal_state);
}

/* One submitAsync or sumOfSquaresAsync: made by the caller, owned by
 * on_done once blz_spawn_ex accepted it. */
typedef struct {
    JavaVM *vm;
    blz_pool *pool;
    jobject future;   /* global reference to the CompletableFuture */
    jobject supplier; /* global reference to the Supplier; NULL: a C sum of squares */
    uint64_t n;       /* the C sum's bound */
    /* Written by the task, read by on_done: on the same worker, after it. */
    int ran;              /* the task ran (BLZ_ECANCELED says it did not) */
    jobject result;       /* global reference to what get() returned (NULL for null) */
    uint64_t sum;         /* the C sum's result */
    jthrowable error;     /* global reference to what get() threw, or NULL */
    const char *failure;  /* a failure that is no Java exception (a static string), or NULL */
} async_task;

/* Takes the exception pending on this worker (no JNI call is legal while
 * one is pending) and keeps it in t->error for on_done. */
static void take_exception(JNIEnv *env, async_task *t) {
    jthrowable e = (*env)->ExceptionOccurred(env);
    (*env)->ExceptionClear(env);
    if (e == NULL) return;
    t->error = (jthrowable)(*env)->NewGlobalRef(env, e);
    if (t->error == NULL) t->failure = "blitz_jni: the task threw, and no memory was left to keep it";
    (*env)->DeleteLocalRef(env, e);
}

/* The task of submitAsync: calls supplier.get() on this worker. */
static void supplier_task(void *arg) {
    async_task *t = (async_task *)arg;
    JNIEnv *env = worker_env(t->vm, blz_worker_index(t->pool));
    jobject r;

    t->ran = 1;
    if (env == NULL) {
        t->failure = "blitz_jni: a worker is not attached to the JVM";
        blz_fail();
        return;
    }
    /* The worker never returns to Java: its local references live until
     * the frame is popped, so the task gets a frame of its own. */
    if ((*env)->PushLocalFrame(env, 4) != 0) { /* OutOfMemoryError pending */
        take_exception(env, t);
        blz_fail();
        return;
    }
    r = (*env)->CallObjectMethod(env, t->supplier, g_java.get);
    if ((*env)->ExceptionCheck(env)) {
        take_exception(env, t);
    } else if (r != NULL) {
        t->result = (*env)->NewGlobalRef(env, r);
        if (t->result == NULL) {
            if ((*env)->ExceptionCheck(env)) take_exception(env, t);
            else t->failure = "blitz_jni: no memory for a global reference to the result";
        }
    }
    (*env)->PopLocalFrame(env, NULL);
    /* on_done gets BLZ_ETASK: a C task reports its failure to libblitz so. */
    if (t->error != NULL || t->failure != NULL) blz_fail();
}

/* The task of sumOfSquaresAsync: a parallel loop in C, started from a
 * worker (that worker runs pieces of it while it waits). */
static void sum_task(void *arg) {
    async_task *t = (async_task *)arg;
    _Atomic uint64_t total;
    blz_status status;

    t->ran = 1;
    atomic_init(&total, 0);
    status = blz_parallel_for(t->pool, 0, (size_t)t->n, 0, squares_range, &total);
    if (status != BLZ_OK) { /* BLZ_ETASK, or BLZ_ECANCELED inside a cancelled group */
        t->failure = blz_status_string(status);
        blz_fail();
        return;
    }
    t->sum = atomic_load(&total);
}

/* An exception pending on this worker completes the future instead of the
 * value that could not be made (an OutOfMemoryError, say), so that the
 * future does not stay pending for ever. */
static void complete_with_pending(JNIEnv *env, jobject future) {
    jthrowable e = (*env)->ExceptionOccurred(env);
    (*env)->ExceptionClear(env);
    if (e == NULL) return;
    (void)(*env)->CallBooleanMethod(env, future, g_java.complete_exceptionally, e);
    (*env)->DeleteLocalRef(env, e);
}

/* future.completeExceptionally(new IllegalStateException(message)). */
static void complete_with_failure(JNIEnv *env, jobject future, const char *message) {
    jstring text = (*env)->NewStringUTF(env, message);
    jobject e;
    if ((*env)->ExceptionCheck(env) || text == NULL) {
        complete_with_pending(env, future);
        return;
    }
    e = (*env)->NewObject(env, g_java.illegal_state, g_java.illegal_state_init, text);
    (*env)->DeleteLocalRef(env, text);
    if ((*env)->ExceptionCheck(env) || e == NULL) {
        complete_with_pending(env, future);
        return;
    }
    (void)(*env)->CallBooleanMethod(env, future, g_java.complete_exceptionally, e);
    (*env)->DeleteLocalRef(env, e);
}

/* Completes t's future as status says. */
static void complete_future(JNIEnv *env, async_task *t, blz_status status) {
    int failed = t->error != NULL || t->failure != NULL;

    /* What libblitz reports must agree with what the task recorded. */
    if ((status == BLZ_OK && (!t->ran || failed)) || (status == BLZ_ETASK && !failed) ||
        (status == BLZ_ECANCELED && t->ran)) {
        char message[160];
        snprintf(message, sizeof message,
                 "blitz_jni: on_done got %s, but the task %s", blz_status_string(status),
                 !t->ran ? "did not run" : failed ? "failed" : "ran and returned normally");
        complete_with_failure(env, t->future, message);
        return;
    }
    switch (status) {
    case BLZ_OK:
        if (t->supplier != NULL) {
            (void)(*env)->CallBooleanMethod(env, t->future, g_java.complete, t->result);
        } else {
            /* Java's long wraps modulo 2^64 as uint64_t does. */
            jobject boxed = (*env)->CallStaticObjectMethod(env, g_java.boxed_long,
                                                           g_java.long_value_of, (jlong)t->sum);
            if ((*env)->ExceptionCheck(env) || boxed == NULL) {
                complete_with_pending(env, t->future);
                return;
            }
            (void)(*env)->CallBooleanMethod(env, t->future, g_java.complete, boxed);
            (*env)->DeleteLocalRef(env, boxed);
        }
        break;
    case BLZ_ETASK:
        if (t->error != NULL) {
            (void)(*env)->CallBooleanMethod(env, t->future, g_java.complete_exceptionally, t->error);
        } else {
            complete_with_failure(env, t->future, t->failure);
        }
        break;
    case BLZ_ECANCELED: /* skipped: its group was cancelled before it started */
        (void)(*env)->CallBooleanMethod(env, t->future, g_java.cancel, JNI_FALSE);
        break;
    default: /* on_done gets no other status; should it, the future says so */
        complete_with_failure(env, t->future, blz_status_string(status));
        break;
    }
}

/* on_done: called once, on the worker that finished the task (or that
 * skipped it), before the pool's destroy returns. */
static void async_done(void *arg, blz_status status) {
    async_task *t = (async_task *)arg;
    JNIEnv *env = worker_env(t->vm, blz_worker_index(t->pool));
    int framed;

    if (status == BLZ_OK) atomic_fetch_add(&g_done_ok, 1);
    else if (status == BLZ_ETASK) atomic_fetch_add(&g_done_failed, 1);
    else if (status == BLZ_ECANCELED) atomic_fetch_add(&g_done_cancelled, 1);

    if (env == NULL) { /* no JNI call possible: the future stays pending, the references leak */
        fprintf(stderr, "blitz_jni: on_done on a worker that cannot attach to the JVM; "
                        "a CompletableFuture will never complete\n");
        free(t);
        atomic_fetch_sub(&g_async_pending, 1);
        return;
    }
    /* A frame of its own: the locals made here (and by complete's stages'
     * native calls, if any) are freed when it is popped. If even that
     * fails, the few locals below are deleted one by one anyway. */
    framed = (*env)->PushLocalFrame(env, 8) == 0;
    if (!framed) (*env)->ExceptionClear(env);

    complete_future(env, t, status);
    if ((*env)->ExceptionCheck(env)) { /* nobody up the stack could catch it */
        fprintf(stderr, "blitz_jni: an exception while completing a future:\n");
        (*env)->ExceptionDescribe(env); /* prints it and clears it */
    }

    (*env)->DeleteGlobalRef(env, t->future);
    if (t->supplier != NULL) (*env)->DeleteGlobalRef(env, t->supplier);
    if (t->result != NULL) (*env)->DeleteGlobalRef(env, t->result);
    if (t->error != NULL) (*env)->DeleteGlobalRef(env, t->error);
    if (framed) (*env)->PopLocalFrame(env, NULL);
    free(t);
    /* Last: Java reads 0 pending only after every on_done has finished. */
    atomic_fetch_sub(&g_async_pending, 1);
}

static blz_group *group_of(jlong handle) { return (blz_group *)(intptr_t)handle; }

/* Spawns t (fn) detached with on_done, into group if not 0. On success t
 * belongs to on_done; on failure it is freed here and an exception is
 * pending. */
static void spawn_async(JNIEnv *env, jni_pool *p, jlong group, async_task *t, blz_fn fn,
                        jobject future) {
    blz_spawn_options options;
    blz_status status;

    t->vm = p->vm;
    t->pool = p->pool;
    t->future = (*env)->NewGlobalRef(env, future);
    if (t->future == NULL) {
        if (t->supplier != NULL) (*env)->DeleteGlobalRef(env, t->supplier);
        free(t);
        if (!(*env)->ExceptionCheck(env)) {
            throw_new(env, "java/lang/OutOfMemoryError", "blitz_jni: no memory for a global reference");
        }
        return;
    }
    blz_spawn_options_init(&options);
    options.group = group != 0 ? group_of(group) : NULL;
    options.on_done = async_done;
    options.done_arg = t;

    /* Counted before the spawn: on_done may run (and count down) before
     * blz_spawn_ex returns. */
    atomic_fetch_add(&g_async_pending, 1);
    status = blz_spawn_ex(p->pool, fn, t, &options, NULL); /* NULL: detached */
    if (status == BLZ_OK) return; /* t is on_done's now: not touched again here */

    atomic_fetch_sub(&g_async_pending, 1);
    (*env)->DeleteGlobalRef(env, t->future);
    if (t->supplier != NULL) (*env)->DeleteGlobalRef(env, t->supplier);
    free(t);
    if (status == BLZ_ESHUTDOWN) {
        throw_new(env, "java/util/concurrent/RejectedExecutionException", blz_status_string(status));
    } else {
        throw_new(env, "java/lang/IllegalStateException", blz_status_string(status));
    }
}

JNIEXPORT void JNICALL Java_BlitzPool_submitNative(JNIEnv *env, jclass cls, jlong handle,
                                                   jlong group, jobject supplier, jobject future) {
    async_task *t;
    (void)cls;
    if (supplier == NULL || future == NULL) {
        throw_new(env, "java/lang/NullPointerException", "task and future must not be null");
        return;
    }
    t = (async_task *)calloc(1, sizeof *t);
    if (t == NULL) {
        throw_new(env, "java/lang/OutOfMemoryError", "blitz_jni: no memory");
        return;
    }
    t->supplier = (*env)->NewGlobalRef(env, supplier);
    if (t->supplier == NULL) {
        free(t);
        if (!(*env)->ExceptionCheck(env)) {
            throw_new(env, "java/lang/OutOfMemoryError", "blitz_jni: no memory for a global reference");
        }
        return;
    }
    spawn_async(env, pool_of(handle), group, t, supplier_task, future);
}

JNIEXPORT void JNICALL Java_BlitzPool_sumOfSquaresAsyncNative(JNIEnv *env, jclass cls, jlong handle,
                                                              jlong n, jobject future) {
    async_task *t;
    (void)cls;
    if (n < 0 || future == NULL) {
        throw_new(env, "java/lang/IllegalArgumentException", "n < 0 or no future");
        return;
    }
    t = (async_task *)calloc(1, sizeof *t);
    if (t == NULL) {
        throw_new(env, "java/lang/OutOfMemoryError", "blitz_jni: no memory");
        return;
    }
    t->n = (uint64_t)n;
    spawn_async(env, pool_of(handle), 0, t, sum_task, future);
}

/* ---- groups: cancellation ----------------------------------------------- */

JNIEXPORT jlong JNICALL Java_BlitzPool_groupCreate(JNIEnv *env, jclass cls, jlong handle) {
    blz_group *group = NULL;
    blz_status status;
    (void)cls;
    status = blz_group_create(pool_of(handle)->pool, &group);
    if (status != BLZ_OK) {
        throw_new(env, "java/lang/IllegalStateException", blz_status_string(status));
        return 0;
    }
    return (jlong)(intptr_t)group;
}

JNIEXPORT void JNICALL Java_BlitzPool_groupCancel(JNIEnv *env, jclass cls, jlong group) {
    (void)env;
    (void)cls;
    (void)blz_group_cancel(group_of(group)); /* BLZ_OK: the group is not NULL */
}

/* Waits for the group's tasks (each future already says how its task
 * ended, so BLZ_ETASK and BLZ_ECANCELED are no errors here), frees it. */
JNIEXPORT void JNICALL Java_BlitzPool_groupDestroy(JNIEnv *env, jclass cls, jlong group) {
    blz_status status;
    (void)cls;
    status = blz_group_destroy(group_of(group));
    if (status == BLZ_EDEADLK) { /* from one of its own tasks: not freed */
        throw_new(env, "java/lang/IllegalStateException", blz_status_string(status));
    }
}

JNIEXPORT jboolean JNICALL Java_BlitzPool_cancelledNative(JNIEnv *env, jclass cls) {
    (void)env;
    (void)cls;
    return blz_cancelled() ? JNI_TRUE : JNI_FALSE;
}

/* {on_done calls with BLZ_OK, with BLZ_ETASK, with BLZ_ECANCELED, async
 * tasks whose on_done has not finished}, since the library was loaded. */
JNIEXPORT jlongArray JNICALL Java_BlitzPool_asyncCounts(JNIEnv *env, jclass cls) {
    jlong counts[4];
    jlongArray result;
    (void)cls;
    counts[0] = (jlong)atomic_load(&g_done_ok);
    counts[1] = (jlong)atomic_load(&g_done_failed);
    counts[2] = (jlong)atomic_load(&g_done_cancelled);
    counts[3] = (jlong)atomic_load(&g_async_pending);
    result = (*env)->NewLongArray(env, 4);
    if (result != NULL) (*env)->SetLongArrayRegion(env, result, 0, 4, counts);
    return result;
}
