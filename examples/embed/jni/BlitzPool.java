import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongUnaryOperator;
import java.util.function.Supplier;

/**
 * A libblitz pool driven from Java through JNI (the C side is blitz_jni.c).
 *
 * <p>The pool's workers are native threads. Its on_thread_start hook
 * attaches each one to the JVM (AttachCurrentThreadAsDaemon) and
 * on_thread_stop detaches it, so a worker can call Java code: {@link #map}
 * runs a Java callback on the workers. {@link #sumOfSquares} is a parallel
 * computation that stays in C. Both block the calling thread (in native
 * code) until the workers are done.
 *
 * <p>{@link #submitAsync} and {@link #sumOfSquaresAsync} block nobody:
 * they spawn a detached task and return a {@link CompletableFuture} at
 * once. The task's completion callback (libblitz's on_done) completes the
 * future on the worker that ran the task: with the value, exceptionally
 * with what the task threw, or cancelled when the task was skipped because
 * its {@link Group} was cancelled. Stages chained on the future
 * (thenApply, ...) before it completed run on that worker too.
 *
 * <p>Close the pool (try-with-resources) before the JVM exits: closing
 * waits for every task and its on_done (every future is complete
 * afterwards) and detaches every worker. Close a {@link Group} before its
 * pool.
 *
 * <p>{@code main} is the example and its test: it prints what ran where,
 * ends with "jni: N passed, M failed" and exits with status 0 when every
 * check passed.
 */
public final class BlitzPool implements AutoCloseable {
    static {
        System.loadLibrary("blitz_jni");
    }

    private long handle;

    /** Starts a pool of {@code threads} workers (0: one per CPU). */
    public BlitzPool(int threads) {
        handle = create(threads);
    }

    /**
     * Returns {@code f} applied to every element, computed by the workers
     * ({@code grain} elements per call at most, 0: automatic). An exception
     * thrown by {@code f} on a worker is rethrown here, on the caller's
     * thread, once the other pieces have finished.
     */
    public long[] map(long[] input, LongUnaryOperator f, int grain) {
        return mapNative(live(), input, f, grain);
    }

    /** 0^2 + 1^2 + ... + (n-1)^2, modulo 2^64, computed in C on the workers. */
    public long sumOfSquares(long n) {
        return sumOfSquaresNative(live(), n);
    }

    /**
     * Runs {@code task.get()} on a worker, later, and returns at once a
     * future that the task's on_done completes: with what get() returned,
     * or exceptionally with what it threw. Cancelling the returned future
     * does not stop the task.
     *
     * @throws RejectedExecutionException if the pool is closing
     */
    public <T> CompletableFuture<T> submitAsync(Supplier<? extends T> task) {
        return submit(live(), 0, task);
    }

    /**
     * {@link #sumOfSquares} without waiting: a task computes it in C on the
     * workers and its on_done completes the returned future.
     */
    public CompletableFuture<Long> sumOfSquaresAsync(long n) {
        CompletableFuture<Long> future = new CompletableFuture<>();
        sumOfSquaresAsyncNative(live(), n, future);
        return future;
    }

    /** A new, empty group of tasks of this pool (close it before the pool). */
    public Group newGroup() {
        long pool = live();
        return new Group(this, groupCreate(pool));
    }

    /**
     * Whether the task calling it belongs to a cancelled {@link Group}: for
     * long tasks to poll, and stop. False outside a task.
     */
    public static boolean cancelled() {
        return cancelledNative();
    }

    private <T> CompletableFuture<T> submit(long pool, long group, Supplier<? extends T> task) {
        CompletableFuture<T> future = new CompletableFuture<>();
        submitNative(pool, group, task, future); // returns once the task is queued
        return future;
    }

    /**
     * Tasks that can be cancelled together (a libblitz group). Cancelling
     * skips the tasks that have not started (their futures end cancelled)
     * and lets the running ones see {@link BlitzPool#cancelled()}.
     */
    public static final class Group implements AutoCloseable {
        private final BlitzPool pool;
        private long handle;

        private Group(BlitzPool pool, long handle) {
            this.pool = pool;
            this.handle = handle;
        }

        /** As {@link BlitzPool#submitAsync}, for a task of this group. */
        public <T> CompletableFuture<T> submitAsync(Supplier<? extends T> task) {
            return pool.submit(pool.live(), live(), task);
        }

        /** Cancels the group (libblitz's blz_group_cancel); never blocks. */
        public void cancel() {
            groupCancel(live());
        }

        /**
         * Waits (in native code) for the group's tasks, and frees it. Their
         * futures already say how each ended, so join them first and this
         * does not wait.
         */
        @Override
        public void close() {
            if (handle != 0) {
                groupDestroy(handle); // from one of its own tasks: throws, the group stays
                handle = 0;
            }
        }

        private long live() {
            if (handle == 0) {
                throw new IllegalStateException("the group is closed");
            }
            return handle;
        }
    }

    /** The number of workers. */
    public int threads() {
        return threadsNative(live());
    }

    /** Waits for every task, detaches and stops the workers, frees the pool. */
    @Override
    public void close() {
        if (handle != 0) {
            destroy(handle); // from one of the pool's own workers: throws, the pool stays open
            handle = 0;
        }
    }

    private long live() {
        if (handle == 0) {
            throw new IllegalStateException("the pool is closed");
        }
        return handle;
    }

    private static native long create(int threads);
    private static native void destroy(long pool);
    private static native int threadsNative(long pool);
    private static native long[] mapNative(long pool, long[] input, LongUnaryOperator f, int grain);
    private static native long sumOfSquaresNative(long pool, long n);
    private static native void submitNative(long pool, long group, Supplier<?> task, CompletableFuture<?> future);
    private static native void sumOfSquaresAsyncNative(long pool, long n, CompletableFuture<Long> future);
    private static native long groupCreate(long pool);
    private static native void groupCancel(long group);
    private static native void groupDestroy(long group);
    private static native boolean cancelledNative();

    /**
     * {on_done calls that got BLZ_OK, BLZ_ETASK, BLZ_ECANCELED; async tasks
     * whose on_done has not finished}, since the library was loaded.
     */
    static native long[] asyncCounts();

    /** Workers attached to the JVM by on_thread_start, since the library was loaded. */
    static native int attachedCount();

    /** Workers detached by on_thread_stop, since the library was loaded. */
    static native int detachedCount();

    /**
     * CompletableFutures completed by on_done: no Java thread waits in
     * native code for them (only the joins, in Java, at the end). Closes
     * the pool last, to check that close waits for every on_done.
     */
    private static void asyncExamples(BlitzPool pool, int workers) {
        // C computations in flight together, each with a thenApply stage.
        long[] before = asyncCounts();
        long[] sizes = {0, 10, 1_000, 50_000, 100_000, 200_000};
        List<CompletableFuture<Boolean>> sums = new ArrayList<>();
        for (long size : sizes) {
            long want = squares(size);
            sums.add(pool.sumOfSquaresAsync(size).thenApply(s -> s == want));
        }
        boolean allRight = true;
        for (CompletableFuture<Boolean> sum : sums) {
            allRight &= sum.join();
        }
        check(allRight, sizes.length + " sumOfSquaresAsync futures, computed in C at once, right through thenApply");

        // A task held back by a latch: submitAsync has returned, the future
        // is pending, and the stages chained now run where on_done runs.
        CountDownLatch go = new CountDownLatch(1);
        AtomicReference<String> taskThread = new AtomicReference<>();
        AtomicReference<String> stageThread = new AtomicReference<>();
        CompletableFuture<Integer> answer = pool.submitAsync(() -> {
            await(go);
            taskThread.set(Thread.currentThread().getName());
            return 6 * 7;
        });
        CompletableFuture<String> chained = answer.thenApply(x -> {
            stageThread.set(Thread.currentThread().getName());
            return x + 1;
        }).thenApply(x -> "answer " + x);
        check(!answer.isDone() && !chained.isDone(),
              "submitAsync returned while its task waits: the future is pending, no Java thread waits in native code");
        go.countDown();
        check("answer 43".equals(chained.join()), "the thenApply chain on it gives \"answer 43\" (joined in Java)");
        check(taskThread.get() != null && taskThread.get().startsWith("blitz-jni-")
                && taskThread.get().equals(stageThread.get()),
              "on_done completed it on the worker that ran the task (" + taskThread.get()
                      + "), where the chained stages ran (" + stageThread.get() + ")");

        // A failing task: the future completes exceptionally with what it threw.
        AtomicInteger stagesRun = new AtomicInteger();
        CompletableFuture<Integer> failing = pool.submitAsync(() -> {
            throw new ArithmeticException("no answer");
        });
        CompletableFuture<Integer> after = failing.thenApply(x -> {
            stagesRun.incrementAndGet();
            return x + 1;
        });
        Throwable cause = null;
        try {
            after.join();
        } catch (CompletionException e) {
            cause = e.getCause();
        }
        check(cause instanceof ArithmeticException && "no answer".equals(cause.getMessage())
                && failing.isCompletedExceptionally() && stagesRun.get() == 0,
              "a task that throws: on_done got BLZ_ETASK, the future completed exceptionally with " + cause
                      + ", the thenApply stage did not run");
        long[] done = doneSince(before);
        check(done[0] == sizes.length + 1 && done[1] == 1 && done[2] == 0,
              "on_done statuses so far: " + done[0] + " BLZ_OK, " + done[1] + " BLZ_ETASK, "
                      + done[2] + " BLZ_ECANCELED");

        // Cancellation: every worker runs a task of the group that polls
        // cancelled(), so the next tasks of the group stay queued; cancelling
        // the group skips those (their futures end cancelled) and stops the
        // running ones (they throw CancellationException themselves).
        before = asyncCounts();
        final int queued = 5;
        CountDownLatch running = new CountDownLatch(workers);
        AtomicInteger queuedRan = new AtomicInteger();
        List<CompletableFuture<String>> pollers = new ArrayList<>();
        List<CompletableFuture<String>> skipped = new ArrayList<>();
        try (Group group = pool.newGroup()) {
            for (int i = 0; i < workers; i++) {
                pollers.add(group.submitAsync(() -> {
                    running.countDown();
                    while (!BlitzPool.cancelled()) {
                        sleep(1);
                    }
                    throw new CancellationException("saw its group cancelled");
                }));
            }
            await(running); // every worker is busy with a poller now
            for (int i = 0; i < queued; i++) {
                skipped.add(group.submitAsync(() -> {
                    queuedRan.incrementAndGet();
                    return "ran";
                }));
            }
            check(skipped.stream().noneMatch(CompletableFuture::isDone), queued + " more tasks of the group wait in the queue");
            group.cancel();
            boolean stopped = true;
            for (CompletableFuture<String> f : pollers) {
                stopped &= "saw its group cancelled".equals(cancellationOf(f)) && f.isCancelled();
            }
            check(stopped, "group.cancel(): the " + workers + " running tasks saw cancelled() and stopped (CancellationException)");
            boolean allSkipped = true;
            for (CompletableFuture<String> f : skipped) {
                allSkipped &= cancellationOf(f) != null && f.isCancelled();
            }
            check(allSkipped && queuedRan.get() == 0,
                  "the " + queued + " queued tasks never ran: on_done got BLZ_ECANCELED, their futures are cancelled");
        }
        done = doneSince(before);
        check(done[0] == 0 && done[1] == workers && done[2] == queued,
              "on_done statuses of the group: " + done[1] + " BLZ_ETASK (the stopped ones), " + done[2] + " BLZ_ECANCELED");

        // close() waits for every on_done. The first tasks wait for a gate
        // that another thread opens while close() runs; when close()
        // returns, every future is complete, and stages chained on them ran.
        before = asyncCounts();
        final int count = 64;
        CountDownLatch gate = new CountDownLatch(1);
        List<CompletableFuture<Long>> last = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            final long k = i;
            last.add(pool.<Long>submitAsync(() -> {
                await(gate);
                return k * k;
            }).thenApply(x -> x + 1));
        }
        check(last.stream().noneMatch(CompletableFuture::isDone), count + " tasks submitted, none done: the first ones wait at a gate");
        Thread opener = new Thread(() -> {
            sleep(200);
            gate.countDown();
        }, "gate-opener");
        opener.start();
        pool.close(); // the one wait in native code: for every task and on_done
        boolean allDone = gate.getCount() == 0;
        for (int i = 0; i < count; i++) {
            CompletableFuture<Long> f = last.get(i);
            allDone &= f.isDone() && !f.isCompletedExceptionally() && f.getNow(-1L) == (long) i * i + 1;
        }
        check(allDone, "close() returned after the gate opened and every on_done ran: all " + count + " futures (and their stages) complete");
        done = doneSince(before);
        long[] counts = asyncCounts();
        check(done[0] == count && done[1] == 0 && done[2] == 0 && counts[3] == 0,
              "on_done ran once per task (" + done[0] + " BLZ_OK), " + counts[3] + " tasks left: every global reference deleted");
        try {
            pool.submitAsync(() -> 1);
            check(false, "submitAsync on a closed pool throws");
        } catch (IllegalStateException e) {
            check(true, "submitAsync on a closed pool throws " + e.getClass().getSimpleName());
        }
        try {
            opener.join();
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    private static int passes = 0;
    private static int failures = 0;

    private static void check(boolean ok, String what) {
        System.out.println((ok ? "ok    " : "FAIL  ") + what);
        if (ok) {
            passes++;
        } else {
            failures++;
        }
    }

    /** CountDownLatch.await without the checked exception, for lambdas. */
    private static void await(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    private static long squares(long n) {
        long sum = 0;
        for (long i = 0; i < n; i++) {
            sum += i * i;
        }
        return sum;
    }

    /** on_done counts now minus {@code before}: {ok, failed, cancelled}. */
    private static long[] doneSince(long[] before) {
        long[] now = asyncCounts();
        return new long[] {now[0] - before[0], now[1] - before[1], now[2] - before[2]};
    }

    /** join() threw a CancellationException; its message, or "" for none. */
    private static String cancellationOf(CompletableFuture<?> future) {
        try {
            future.join();
            return null;
        } catch (CancellationException e) {
            return e.getMessage() == null ? "" : e.getMessage();
        } catch (CompletionException e) {
            return null;
        }
    }

    public static void main(String[] args) {
        final int workers = 3;
        final int n = 100_000;
        String caller = Thread.currentThread().getName();
        Set<String> ranOn = ConcurrentHashMap.newKeySet();

        try (BlitzPool pool = new BlitzPool(workers)) {
            check(pool.threads() == workers, "a pool of " + workers + " workers");

            // A parallel computation in C.
            long expected = 0;
            for (long i = 0; i < n; i++) {
                expected += i * i;
            }
            check(pool.sumOfSquares(n) == expected, "sumOfSquares(" + n + ") in C on the workers = " + expected);

            // A parallel map whose function is Java, called from the workers.
            long[] input = new long[n];
            Arrays.setAll(input, i -> i);
            long[] output = pool.map(input, x -> {
                ranOn.add(Thread.currentThread().getName());
                return 3 * x + 1;
            }, 1000);
            boolean right = output.length == n;
            for (int i = 0; right && i < n; i++) {
                right = output[i] == 3L * i + 1;
            }
            check(right, "map(x -> 3x + 1) over " + n + " elements, the Java lambda called on the workers");
            System.out.println("      the lambda ran on: " + new java.util.TreeSet<>(ranOn));
            check(!ranOn.isEmpty() && !ranOn.contains(caller)
                    && ranOn.stream().allMatch(name -> name.startsWith("blitz-jni-")),
                  "only attached workers (blitz-jni-*) ran it, never the calling thread '" + caller + "'");

            // An exception thrown on a worker reaches the caller.
            try {
                pool.map(input, x -> {
                    if (x == 77_777) {
                        throw new ArithmeticException("no 77777 here");
                    }
                    return x;
                }, 1000);
                check(false, "an exception in the lambda reaches the caller");
            } catch (ArithmeticException e) {
                check("no 77777 here".equals(e.getMessage()),
                      "an exception thrown by the lambda on a worker is rethrown to the caller: " + e);
            }

            // The pool still works afterwards, and the JVM can collect garbage
            // while workers call into Java (every worker is attached, so a
            // safepoint can stop it; the waiting caller is in native code).
            long[] again = pool.map(input, x -> {
                byte[] garbage = new byte[256];
                return x + garbage.length;
            }, 0);
            System.gc();
            check(again[n - 1] == n - 1 + 256, "the pool works after the exception, with allocation and a GC");

            asyncExamples(pool, workers);
        }

        check(attachedCount() == workers, "on_thread_start attached " + attachedCount() + " workers");
        check(detachedCount() == workers, "on_thread_stop detached " + detachedCount() + " workers when the pool closed");

        // The line tools/test_summary.py counts.
        System.out.println("jni: " + passes + " passed, " + failures + " failed");
        System.exit(failures == 0 ? 0 : 1);
    }
}
