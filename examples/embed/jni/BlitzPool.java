import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongUnaryOperator;

/**
 * A libblitz pool driven from Java through JNI (the C side is blitz_jni.c).
 *
 * <p>The pool's workers are native threads. Its on_thread_start hook
 * attaches each one to the JVM (AttachCurrentThreadAsDaemon) and
 * on_thread_stop detaches it, so a worker can call Java code: {@link #map}
 * runs a Java callback on the workers. {@link #sumOfSquares} is a parallel
 * computation that stays in C.
 *
 * <p>Close the pool (try-with-resources) before the JVM exits: closing
 * waits for every task and detaches every worker.
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

    /** Workers attached to the JVM by on_thread_start, since the library was loaded. */
    static native int attachedCount();

    /** Workers detached by on_thread_stop, since the library was loaded. */
    static native int detachedCount();

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
        }

        check(attachedCount() == workers, "on_thread_start attached " + attachedCount() + " workers");
        check(detachedCount() == workers, "on_thread_stop detached " + detachedCount() + " workers when the pool closed");

        // The line tools/test_summary.py counts.
        System.out.println("jni: " + passes + " passed, " + failures + " failed");
        System.exit(failures == 0 ? 0 : 1);
    }
}
