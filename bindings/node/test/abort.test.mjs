// AbortSignal -> blz_group_cancel: queued work is skipped, running built-in
// kernels stop, and the promise rejects with an AbortError (as Node's own
// APIs do) only after the native work has stopped.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { after, test } from 'node:test';
import zlib from 'node:zlib';
import { blitz, isPending, kernel, newGate, openGate, waitUntil } from './helpers.mjs';

const pool = new blitz.Pool({ threads: 2 });
after(() => pool.close());

function isAbortError(reason) {
  return (e) => {
    assert.ok(e instanceof Error);
    assert.equal(e.name, 'AbortError');
    assert.equal(e.code, 'ABORT_ERR');
    assert.equal(e.cause, reason);
    return true;
  };
}

test('an already aborted signal rejects at once and runs nothing', async () => {
  const counter = new Uint32Array(1);
  const reason = new Error('not wanted');
  const signal = AbortSignal.abort(reason);
  await assert.rejects(pool.run(kernel('blzt_count'), counter, { signal }), isAbortError(reason));
  await assert.rejects(pool.crc32([Buffer.from('x')], { signal }), isAbortError(reason));
  await pool.run(blitz.kernels.noop);
  assert.equal(counter[0], 0);
});

test('abort stops the running tasks (blz_cancelled) and skips the queued ones', async () => {
  // Two signals: each call's cancel reaches it when the abort event calls
  // its listener, so with one signal a worker released by an earlier
  // listener could start a queued call before that call's own cancel.
  const running = new AbortController();
  const waiting = new AbortController();
  const gate = newGate();
  const counter = new Uint32Array(1);
  const gated = [0, 1].map(() => pool.run(kernel('blzt_gate'), gate, { signal: running.signal }));
  await waitUntil(() => Atomics.load(gate, 1) === 2, 'both workers wait at the gate');
  const queued = Array.from({ length: 10 }, () => pool.run(kernel('blzt_count'), counter, { signal: waiting.signal }));
  const bystander = pool.run(kernel('blzt_count'), counter); // no signal: must still run
  assert.ok(await isPending(queued[0]));
  // Handlers on every promise before anything can reject.
  const stoppedWhenRejected = [];
  const gatedOutcomes = Promise.allSettled(gated.map((p) => p.catch((e) => {
    stoppedWhenRejected.push(Atomics.load(gate, 2));
    throw e;
  })));
  const queuedOutcomes = Promise.allSettled(queued);
  waiting.abort('skip');
  running.abort('stop');
  for (const o of await gatedOutcomes) assert.ok(o.status === 'rejected' && isAbortError('stop')(o.reason));
  for (const o of await queuedOutcomes) assert.ok(o.status === 'rejected' && isAbortError('skip')(o.reason));
  assert.equal(Atomics.load(gate, 2), 2, 'both gate tasks saw blz_cancelled and returned');
  assert.equal(Atomics.load(gate, 3), 0, 'neither went past the gate');
  assert.ok(stoppedWhenRejected.every((stopped) => stopped >= 1), 'rejected only after the kernel stopped');
  await bystander;
  assert.equal(counter[0], 1, 'the 10 queued tasks were skipped; the one without a signal ran');
});

test('abort stops a parallelFor from starting further pieces', async () => {
  const controller = new AbortController();
  const gate = newGate();
  const promise = pool.parallelFor(0, 1000, kernel('blzt_gate_range', 'range'), gate,
    { grain: 1, signal: controller.signal });
  await waitUntil(() => Atomics.load(gate, 1) >= 2, 'two pieces are running');
  controller.abort();
  await assert.rejects(promise, { name: 'AbortError' });
  const started = Atomics.load(gate, 1);
  assert.ok(started < 1000, `${started} of 1000 pieces started`);
  assert.equal(Atomics.load(gate, 2), started, 'every started piece saw the cancel');
});

test('abort of crc32 and sort: the rest of the pool is not affected', async () => {
  const controller = new AbortController();
  const big = Array.from({ length: 16 }, () => randomBytes(2 * 1024 * 1024));
  const data = Float64Array.from({ length: 1500000 }, (_, i) => Math.sin(i) * 1000);
  const original = data.slice().sort();
  const crc = pool.crc32(big, { signal: controller.signal });
  const sort = pool.sort(data, { signal: controller.signal });
  const other = pool.crc32(big.slice(0, 2));
  controller.abort();
  const [crcOutcome, sortOutcome] = await Promise.allSettled([crc, sort]);
  assert.equal(crcOutcome.reason?.name, 'AbortError');
  assert.equal(sortOutcome.reason?.name, 'AbortError');
  // Whatever the abort cut short, the array holds a permutation of its input.
  assert.deepEqual(data.slice().sort(), original);
  assert.deepEqual(await other, big.slice(0, 2).map((b) => zlib.crc32(b)));
});

test('a kernel that ignores cancellation finishes first; the promise still rejects', async () => {
  const controller = new AbortController();
  // [ms, set to 1 once the kernel started], shared: seen while the kernel runs
  const arg = new Float64Array(new SharedArrayBuffer(16));
  arg[0] = 150;
  const started = performance.now();
  const promise = pool.run(kernel('blzt_busy_ms'), arg, { signal: controller.signal });
  await waitUntil(() => arg[1] === 1, 'the kernel started');
  controller.abort();
  await assert.rejects(promise, { name: 'AbortError' });
  const ms = performance.now() - started;
  assert.ok(ms >= 145, `settled after ${ms.toFixed(0)} ms: not before the kernel returned`);
});

test('aborting after the promise settled changes nothing', async () => {
  const controller = new AbortController();
  const arg = new Uint32Array(1);
  assert.equal(await pool.run(kernel('blzt_count'), arg, { signal: controller.signal }), arg);
  controller.abort();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(arg[0], 1);
});

test('one signal shared by many calls: one listener, no MaxListenersExceededWarning, every call aborted', async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  const controller = new AbortController();
  const { signal } = controller;
  let listeners;
  try {
    const done = await Promise.all(Array.from({ length: 40 }, () => pool.run(blitz.kernels.noop, undefined, { signal })));
    assert.equal(done.length, 40);
    assert.equal(getEventListeners(signal, 'abort').length, 0, 'no listener is left once the calls settled');
    const gate = newGate();
    const gated = [0, 1].map(() => pool.run(kernel('blzt_gate'), gate, { signal }));
    const queued = Array.from({ length: 30 }, () => pool.run(blitz.kernels.noop, undefined, { signal }));
    listeners = getEventListeners(signal, 'abort').length;
    await waitUntil(() => Atomics.load(gate, 1) === 2, 'both workers wait at the gate');
    controller.abort('all of them');
    for (const o of await Promise.allSettled([...gated, ...queued])) {
      assert.ok(o.status === 'rejected' && isAbortError('all of them')(o.reason));
    }
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on a later tick
  } finally {
    process.off('warning', onWarning);
  }
  assert.deepEqual(warnings, []);
  assert.equal(listeners, 1, '32 pending calls on one signal, one listener');
});
