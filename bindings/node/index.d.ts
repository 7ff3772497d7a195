// Type declarations of the libblitz Node.js package (index.js).

/**
 * Memory a native function or kernel reads or writes: a view of a
 * SharedArrayBuffer in place (zero-copy, shared while the kernel runs);
 * anything else through the call's own copy, written back when it settles.
 */
export type Bytes = ArrayBufferView | ArrayBuffer;

/** The blz_status names a failed call carries as `code`. */
export type BlitzStatusName =
  | 'BLZ_EINVAL' | 'BLZ_ENOMEM' | 'BLZ_ETHREAD' | 'BLZ_ESHUTDOWN' | 'BLZ_EDEADLK'
  | 'BLZ_ETASK' | 'BLZ_EFORK' | 'BLZ_ETIMEDOUT' | 'BLZ_ECANCELED';

/**
 * The Error a failed call rejects with: a task called blz_fail ('BLZ_ETASK'),
 * the pool is closed ('BLZ_ESHUTDOWN'), ...; or 'ERR_BLITZ_DETACHED' (no
 * `status`): the buffer its copy was to be written back into was detached
 * or shrunk before the call settled.
 */
export interface BlitzError extends Error {
  code: BlitzStatusName | 'ERR_BLITZ_DETACHED';
  /** The numeric blz_status (negative); absent with 'ERR_BLITZ_DETACHED'. */
  status?: number;
}

/** What an aborted call rejects with, as Node's own APIs do. */
export class AbortError extends Error {
  readonly name: 'AbortError';
  readonly code: 'ABORT_ERR';
  /** The signal's reason. */
  cause: unknown;
  constructor(message?: string, options?: { cause?: unknown });
}

/**
 * A C function looked up by name: kind 'task' is `void fn(void *arg)`
 * (blz_fn), kind 'range' is `void fn(void *arg, size_t begin, size_t end)`
 * (blz_range_fn). It runs on the pool's workers; it may call blz_fail()
 * to fail and poll blz_cancelled() to stop early.
 */
export class NativeFunction {
  private constructor();
  readonly kind: 'task' | 'range';
  readonly library: string;
  readonly symbol: string;
}

export interface SignalOptions {
  /** Aborting cancels the call (blz_task_cancel); it rejects with AbortError once its native work stopped. */
  signal?: AbortSignal;
}

export interface RunOptions extends SignalOptions {
  /**
   * Runs once each of these has completed: an Event set (BLZ_OK), or a
   * Promise fulfilled. An Event set with 'BLZ_ETASK' or 'BLZ_ECANCELED'
   * (or closed unset), or a rejected Promise, cancels the call: it rejects
   * with code 'BLZ_ECANCELED'. No thread waits meanwhile.
   */
  after?: ReadonlyArray<Event | Promise<unknown>>;
}

/** A completion set from JavaScript (blz_event), for RunOptions.after. */
export class Event {
  constructor();
  /** Once; throws 'BLZ_EINVAL' on a second set or a closed event. */
  set(status?: 'BLZ_OK' | 'BLZ_ETASK' | 'BLZ_ECANCELED'): void;
  /** Idempotent; an event closed unset cancels the calls waiting for it. */
  close(): void;
}

export interface ParallelForOptions extends SignalOptions {
  /** The most indices per call of the body; 0 or absent: automatic. */
  grain?: number;
}

export type MapOperation = 'sqrt' | 'abs' | 'negate' | 'square' | 'exp' | 'log' | 'sin' | 'cos';

export interface MapOptions<T extends Float64Array | Float32Array> extends ParallelForOptions {
  /** Where to write (same type and length as the input; may be the input). Default: a new array. */
  output?: T;
}

/** A snapshot of the pool's counters (blz_stats), plus the calls not yet settled. */
export interface PoolStats {
  threads: number;
  sleepingNow: number;
  inactiveNow: number;
  jobsExecuted: number;
  jobsInjected: number;
  steals: number;
  sleeps: number;
  wakeups: number;
  spuriousWakeups: number;
  sleepAborts: number;
  tasksFailed: number;
  inFlight: number;
}

export interface PoolOptions {
  /** 1..65535 workers; 0 or absent: BLZ_NUM_THREADS, else one per CPU this process may use. */
  threads?: number;
  /**
   * The process pool (blz_pool_shared), shared by every Pool, worker_thread
   * and native library of the process; default: true when threads is 0 or
   * absent. false: a pool of its own.
   */
  shared?: boolean;
}

/**
 * A libblitz pool. Calls return Promises settled from the tasks' completion
 * callbacks; the event loop never waits. An idle pool does not keep the
 * process alive; one with calls in flight does, until they settle.
 */
export class Pool {
  constructor(options?: PoolOptions);
  /** The number of workers. */
  readonly threads: number;
  /** Whether close() was called. */
  readonly closed: boolean;
  /** Runs fn(pointer to arg's bytes, or NULL) on a worker; resolves to arg. */
  run<A extends Bytes | null | undefined = undefined>(fn: NativeFunction, arg?: A, options?: RunOptions): Promise<A>;
  /** Calls fn(arg, lo, hi) on disjoint sub-ranges covering [begin, end), in parallel; resolves to arg. */
  parallelFor<A extends Bytes | null | undefined = undefined>(begin: number, end: number, fn: NativeFunction, arg?: A,
    options?: ParallelForOptions): Promise<A>;
  /** The CRC-32 (IEEE, as zlib.crc32) of each buffer, in parallel. */
  crc32(buffers: readonly Bytes[], options?: SignalOptions): Promise<number[]>;
  /** Sorts in place in the order of Float64Array.prototype.sort; resolves to the array. */
  sort(array: Float64Array, options?: SignalOptions): Promise<Float64Array>;
  /** output[i] = op(input[i]) in parallel; op is a name or {mul, add} (x * mul + add). */
  map<T extends Float64Array | Float32Array>(input: T, op: MapOperation | { mul?: number; add?: number },
    options?: MapOptions<T>): Promise<T>;
  /** A snapshot of the counters; throws a BlitzError 'BLZ_ESHUTDOWN' once closed. */
  stats(): PoolStats;
  /** Refuses new work; resolves once every accepted call settled and the workers stopped. */
  close(): Promise<void>;
}

/** Looks a C function up by name (dlopen + dlsym) in a shared library or another addon. */
export function nativeFunction(library: string, symbol: string, kind?: 'task' | 'range'): NativeFunction;

/** Built-in native functions: `noop`, the empty task. */
export const kernels: { readonly noop: NativeFunction };

/** The CRC-32 of one buffer on the calling thread (the kernel pool.crc32 runs). */
export function crc32Sync(data: Bytes): number;

/** The names map() accepts. */
export const mapOperations: readonly MapOperation[];
/** This package's version. */
export const version: string;
/** The version of the libblitz.so the addon loaded, "major.minor.patch". */
export const libraryVersion: string;
/** The addon file that was loaded. */
export const addonPath: string;

declare const blitz: {
  Pool: typeof Pool;
  NativeFunction: typeof NativeFunction;
  AbortError: typeof AbortError;
  nativeFunction: typeof nativeFunction;
  kernels: typeof kernels;
  crc32Sync: typeof crc32Sync;
  mapOperations: typeof mapOperations;
  version: string;
  libraryVersion: string;
  addonPath: string;
};
export default blitz;
