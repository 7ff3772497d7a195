'use strict';
/*
 * libblitz for Node.js: a work-stealing thread pool whose tasks are C
 * functions and whose results arrive as Promises, without blocking the
 * event loop. This file validates arguments (bad ones throw TypeError or
 * RangeError before anything starts) and turns AbortSignals into task
 * cancels; the addon in src/ does the rest (docs/embedding.md, "Node.js").
 */
const path = require('node:path');

// BLITZ_NODE_ADDON: the addon meson built (the tests); otherwise the one
// the install script compiled into build/.
const addonPath = path.resolve(process.env.BLITZ_NODE_ADDON || path.join(__dirname, 'build', 'blitz_node.node'));

function loadAddon(file) {
  try {
    return require(file);
  } catch (error) {
    const hint = new Error(
      `libblitz: cannot load the native addon ${file}: ${error.message}\n` +
        'Build it with `npm run build` in the package (it needs a C compiler, the Node-API ' +
        'headers and libblitz: BLITZ_LIB_DIR, pkg-config blitz, or a built checkout).',
      { cause: error });
    hint.code = 'ERR_BLITZ_ADDON';
    throw hint;
  }
}

const native = loadAddon(addonPath);

/** The version of this package and the libblitz it runs on. */
const version = require('./package.json').version;
const libraryVersion = (() => {
  const n = native.libraryVersion();
  return `${Math.floor(n / 10000)}.${Math.floor(n / 100) % 100}.${n % 100}`;
})();

const kHandle = Symbol('libblitz.handle');
const kKind = Symbol('libblitz.kind');

function typeError(message) {
  const e = new TypeError(message);
  e.code = 'ERR_INVALID_ARG_TYPE';
  return e;
}

function rangeError(message) {
  const e = new RangeError(message);
  e.code = 'ERR_OUT_OF_RANGE';
  return e;
}

/** Like Node's own: name 'AbortError', code 'ABORT_ERR', the signal's reason as cause. */
class AbortError extends Error {
  constructor(message = 'The operation was aborted', options = undefined) {
    super(message, options);
    this.code = 'ABORT_ERR';
    this.name = 'AbortError';
  }
}

function abortError(signal) {
  return new AbortError(undefined, { cause: signal.reason });
}

/**
 * A C function that runs on the pool's workers: kind 'task' is a blz_fn,
 * void fn(void *arg); kind 'range' is a blz_range_fn,
 * void fn(void *arg, size_t begin, size_t end). Made by nativeFunction();
 * the pointer itself never reaches JavaScript.
 */
class NativeFunction {
  constructor(handle, kind, library, symbol) {
    if (handle !== kHandle) throw new TypeError('use blitz.nativeFunction(library, symbol, kind)');
    this[kKind] = kind;
    this.kind = kind;
    this.library = library;
    this.symbol = symbol;
    Object.freeze(this);
  }
}

function makeNativeFunction(nativeHandle, kind, library, symbol) {
  const f = new NativeFunction(kHandle, kind, library, symbol);
  nativeHandles.set(f, nativeHandle);
  return f;
}

// NativeFunction -> the addon's tagged handle (frozen objects cannot hold it).
const nativeHandles = new WeakMap();

/**
 * Looks a C function up by name in a shared library (dlopen + dlsym): a
 * .so of your own, or another addon's .node file. The library stays loaded
 * for the life of the process. The binding cannot check the function's C
 * signature: it must be the one `kind` names.
 */
function nativeFunction(library, symbol, kind = 'task') {
  if (typeof library !== 'string' || library === '') throw typeError('library must be a non-empty string (a path)');
  if (typeof symbol !== 'string' || symbol === '') throw typeError('symbol must be a non-empty string');
  if (kind !== 'task' && kind !== 'range') throw typeError("kind must be 'task' or 'range'");
  const handle = native.loadFunction(library, symbol, kind === 'task' ? 0 : 1);
  return makeNativeFunction(handle, kind, library, symbol);
}

// Event -> the addon's event handle.
const eventHandles = new WeakMap();
const EVENT_STATUS = Object.freeze({ __proto__: null, BLZ_OK: 0, BLZ_ETASK: -6, BLZ_ECANCELED: -9 });

/**
 * A completion set from JavaScript (libblitz 0.3's blz_event): calls run
 * with {after: [event]} start once it is set. Set it once: set() for
 * success, set('BLZ_ETASK') or set('BLZ_ECANCELED') for work that failed or
 * was given up, which cancels the calls after it (they reject with
 * 'BLZ_ECANCELED'). close() gives it up; an event closed, garbage-collected
 * or torn down with its env unset cancels the calls waiting for it.
 */
class Event {
  constructor() {
    eventHandles.set(this, native.createEvent());
  }

  /** Sets the event; throws 'BLZ_EINVAL' on a second set or a closed event. */
  set(status = 'BLZ_OK') {
    const code = typeof status === 'string' ? EVENT_STATUS[status] : undefined;
    if (code === undefined) throw typeError("status must be 'BLZ_OK', 'BLZ_ETASK' or 'BLZ_ECANCELED'");
    native.setEvent(handleOfEvent(this), code);
  }

  /** Gives the event up (idempotent); unset, it cancels the calls waiting for it. */
  close() {
    native.closeEvent(handleOfEvent(this));
  }
}

function handleOfEvent(event) {
  const handle = eventHandles.get(event);
  if (handle === undefined) throw typeError('not a libblitz Event');
  return handle;
}

/**
 * options.after of run(): Events, and Promises (any: another call's, or
 * your own), each of which becomes an Event that its settlement sets
 * (fulfilled: BLZ_OK, rejected: BLZ_ETASK) and then closes. A fresh array
 * of event handles for the addon, which reads it without running any
 * JavaScript. A Promise's settlement reaches the call through this event
 * loop, so a call after another call starts one loop turn after it.
 */
function afterHandles(after) {
  if (after === undefined) return undefined;
  if (!Array.isArray(after)) throw typeError('options.after must be an array of Events and Promises');
  const handles = [];
  for (const item of Array.from(after)) {
    if (item instanceof Promise) {
      const bridge = new Event();
      const settle = (status) => {
        try {
          bridge.set(status);
        } catch {
          // Closed by its env's teardown already: nothing waits any more.
        }
        bridge.close();
      };
      Promise.prototype.then.call(item, () => settle('BLZ_OK'), () => settle('BLZ_ETASK'));
      handles.push(handleOfEvent(bridge));
    } else if (item instanceof Event) {
      handles.push(handleOfEvent(item));
    } else {
      throw typeError('options.after must hold Events and Promises only');
    }
  }
  return handles;
}

/** Functions built into the addon: `noop`, the empty task (for the round-trip latency). */
const kernels = Object.freeze({
  noop: makeNativeFunction(native.builtinFunction('noop'), 'task', '(built-in)', 'noop'),
});

const MAP_OPS = ['affine', 'sqrt', 'abs', 'negate', 'square', 'exp', 'log', 'sin', 'cos'];

function isBytes(v) {
  return ArrayBuffer.isView(v) || v instanceof ArrayBuffer;
}

/*
 * An early, friendly TypeError only. What memory a kernel uses is decided
 * in the addon (src/args.c), from the values it reads itself, once each: a program
 * can make these checks see something else (a getter, a shadowed property).
 */
function checkBytes(v, what) {
  if (!isBytes(v)) throw typeError(`${what} must be a Buffer, TypedArray, DataView or ArrayBuffer`);
}

function checkArg(arg) {
  if (arg === undefined || arg === null) return;
  checkBytes(arg, 'arg');
}

function checkOptions(options) {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') throw typeError('options must be an object');
  return options;
}

function checkSignal(signal) {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) throw typeError('options.signal must be an AbortSignal');
  return signal;
}

function checkIndex(v, what) {
  if (typeof v !== 'number') throw typeError(`${what} must be a number`);
  if (!Number.isSafeInteger(v) || v < 0) throw rangeError(`${what} must be an integer from 0 to 2^53 - 1`);
  return v;
}

function checkFunction(fn, kind, method) {
  const handle = fn instanceof NativeFunction ? nativeHandles.get(fn) : undefined;
  if (handle === undefined) throw typeError(`${method} needs a NativeFunction (blitz.nativeFunction)`);
  if (fn[kKind] !== kind) throw typeError(`${method} needs a NativeFunction of kind '${kind}', not '${fn[kKind]}'`);
  return handle;
}

/*
 * The pending calls of each signal, behind one 'abort' listener however
 * many calls share the signal (a listener per call would pass
 * EventTarget's limit of 10 and print MaxListenersExceededWarning).
 * AbortSignal -> {tokens: Set of the calls' cancel tokens, onAbort}.
 */
const signalCalls = new WeakMap();

function follow(signal, token) {
  let entry = signalCalls.get(signal);
  if (entry === undefined) {
    const tokens = new Set();
    const onAbort = () => {
      // A later call on this signal (one dispatched 'abort' by hand) starts a new entry.
      signalCalls.delete(signal);
      for (const t of tokens) {
        t.aborted = true;
        native.cancel(t);
      }
    };
    entry = { tokens, onAbort };
    signalCalls.set(signal, entry);
    signal.addEventListener('abort', onAbort, { once: true });
  }
  entry.tokens.add(token);
  return entry;
}

function unfollow(signal, entry, token) {
  entry.tokens.delete(token);
  if (entry.tokens.size === 0 && signalCalls.get(signal) === entry) {
    signalCalls.delete(signal);
    signal.removeEventListener('abort', entry.onAbort);
  }
}

/*
 * Starts a native call with a cancel token when a signal is given. The
 * returned promise settles only once the native work has stopped: a call
 * aborted while it runs rejects with AbortError after its kernel returned,
 * so that the caller may reuse its buffers the moment it sees the rejection.
 */
function withSignal(signal, start) {
  if (signal === undefined) return start(undefined);
  if (signal.aborted) return Promise.reject(abortError(signal));
  const token = { aborted: false };
  const entry = follow(signal, token);
  let promise;
  try {
    promise = start(token);
  } catch (error) {
    unfollow(signal, entry, token);
    throw error;
  }
  // Aborted while the call was being made (by a getter of its arguments),
  // before the addon took the token: cancel now that it has.
  if (token.aborted) native.cancel(token);
  const settled = () => {
    unfollow(signal, entry, token);
    return token.aborted;
  };
  // The addon settles a call that cancel() reached as aborted (its copy not
  // written back); one it settled as a success before the abort came keeps
  // its value, since its writes already arrived.
  return promise.then(
    (value) => {
      settled();
      return value;
    },
    (error) => {
      if (settled()) throw abortError(signal);
      throw error;
    });
}

class Pool {
  #handle;
  #threads;
  #closed = false;

  /**
   * @param {{threads?: number, shared?: boolean}} [options] threads:
   *   1..65535 workers; 0 or absent: BLZ_NUM_THREADS, else one per CPU this
   *   process may use (within its cgroup CPU quota). shared (default: true
   *   when threads is 0 or absent): the pool is the process pool
   *   (blz_pool_shared), the one every Pool, worker_thread and native
   *   library of the process shares, created by whoever comes first; with
   *   threads set it must have that many workers (else 'BLZ_EINVAL').
   *   shared: false makes a pool of its own ("blz-node-i" threads).
   */
  constructor(options = undefined) {
    const opts = checkOptions(options);
    const { threads = 0 } = opts;
    if (typeof threads !== 'number') throw typeError('options.threads must be a number');
    if (!Number.isInteger(threads) || threads < 0 || threads > 65535) {
      throw rangeError('options.threads must be an integer from 0 to 65535');
    }
    const { shared = threads === 0 } = opts;
    if (typeof shared !== 'boolean') throw typeError('options.shared must be a boolean');
    this.#handle = native.createPool(threads, shared);
    this.#threads = native.poolThreads(this.#handle);
  }

  /** The number of workers. */
  get threads() {
    return this.#threads;
  }

  /** Whether close() was called (new work is refused with BLZ_ESHUTDOWN). */
  get closed() {
    return this.#closed;
  }

  // A closed pool answers BLZ_ESHUTDOWN (from the addon), even to a call
  // whose signal is already aborted.
  #start(signal, start) {
    return this.#closed ? start(undefined) : withSignal(signal, start);
  }

  /**
   * Runs fn(pointer to arg's bytes, or NULL) once on a worker. Resolves to
   * arg when fn returned; rejects with code 'BLZ_ETASK' if fn called blz_fail.
   */
  run(fn, arg = undefined, options = undefined) {
    const handle = checkFunction(fn, 'task', 'run');
    checkArg(arg);
    const opts = checkOptions(options);
    const signal = checkSignal(opts.signal);
    const after = afterHandles(opts.after);
    return this.#start(signal, (token) => native.run(this.#handle, handle, arg, token, after));
  }

  /**
   * Calls fn(pointer to arg's bytes, lo, hi) on disjoint sub-ranges covering
   * [begin, end), in parallel, at most `grain` indices per call (0:
   * automatic). Resolves to arg; the first failing piece (blz_fail) stops
   * the rest and the promise rejects with 'BLZ_ETASK'.
   */
  parallelFor(begin, end, fn, arg = undefined, options = undefined) {
    checkIndex(begin, 'begin');
    checkIndex(end, 'end');
    if (begin > end) throw rangeError('begin must not be greater than end');
    const handle = checkFunction(fn, 'range', 'parallelFor');
    checkArg(arg);
    const opts = checkOptions(options);
    const grain = opts.grain === undefined ? 0 : checkIndex(opts.grain, 'options.grain');
    const signal = checkSignal(opts.signal);
    return this.#start(signal, (token) => native.parallelFor(this.#handle, begin, end, grain, handle, arg, token));
  }

  /** The CRC-32 (IEEE, as zlib.crc32) of each buffer, computed in parallel. */
  crc32(buffers, options = undefined) {
    if (!Array.isArray(buffers)) throw typeError('buffers must be an array');
    buffers.forEach((b, i) => checkBytes(b, `buffers[${i}]`));
    const signal = checkSignal(checkOptions(options).signal);
    return this.#start(signal, (token) => native.crc32(this.#handle, buffers, token));
  }

  /**
   * Sorts a Float64Array in place, in parallel, in the order of
   * Float64Array.prototype.sort (-0 before +0, NaN last); resolves to it.
   * Aborted, it rejects and leaves the array a permutation of its input.
   */
  sort(array, options = undefined) {
    if (!(array instanceof Float64Array)) throw typeError('sort needs a Float64Array');
    checkBytes(array, 'array');
    const signal = checkSignal(checkOptions(options).signal);
    return this.#start(signal, (token) => native.sort(this.#handle, array, token));
  }

  /**
   * output[i] = op(input[i]) in parallel, for a Float64Array or Float32Array.
   * op: 'sqrt', 'abs', 'negate', 'square', 'exp', 'log', 'sin', 'cos', or
   * {mul, add} for x * mul + add. options.output: where to write (same type
   * and length; may be input itself), else a new array. Resolves to output.
   */
  map(input, op, options = undefined) {
    if (!(input instanceof Float64Array || input instanceof Float32Array)) {
      throw typeError('map needs a Float64Array or Float32Array');
    }
    checkBytes(input, 'input');
    let code;
    let mul = 1;
    let add = 0;
    if (typeof op === 'string') {
      code = MAP_OPS.indexOf(op);
      if (code <= 0) throw rangeError(`unknown map operation '${op}' (one of ${MAP_OPS.slice(1).join(', ')}, or {mul, add})`);
    } else if (op !== null && typeof op === 'object') {
      code = 0;
      ({ mul = 1, add = 0 } = op);
      if (typeof mul !== 'number' || typeof add !== 'number') throw typeError('op.mul and op.add must be numbers');
    } else {
      throw typeError("op must be a string or {mul, add}");
    }
    const opts = checkOptions(options);
    let output = opts.output;
    if (output === undefined) {
      output = new input.constructor(input.length);
    } else {
      if (!(output instanceof input.constructor)) throw typeError(`options.output must be a ${input.constructor.name}`);
      checkBytes(output, 'options.output');
      if (output.length !== input.length) throw rangeError("options.output must have the input's length");
    }
    const grain = opts.grain === undefined ? 0 : checkIndex(opts.grain, 'options.grain');
    const signal = checkSignal(opts.signal);
    return this.#start(signal, (token) => native.map(this.#handle, input, output, code, mul, add, grain, token));
  }

  /** A snapshot of the pool's counters; throws 'BLZ_ESHUTDOWN' once closed. */
  stats() {
    return native.stats(this.#handle);
  }

  /**
   * Refuses new work, and resolves once every accepted call has settled and
   * the workers have stopped. The same promise on every call.
   */
  close() {
    this.#closed = true;
    return native.close(this.#handle);
  }
}

/** zlib-compatible CRC-32 of one buffer, on the calling thread (the kernel pool.crc32 runs). */
function crc32Sync(data) {
  checkBytes(data, 'data');
  return native.crc32Sync(data);
}

module.exports = {
  Pool,
  Event,
  NativeFunction,
  AbortError,
  nativeFunction,
  kernels,
  crc32Sync,
  version,
  libraryVersion,
  addonPath,
  mapOperations: Object.freeze(MAP_OPS.slice(1)),
};
