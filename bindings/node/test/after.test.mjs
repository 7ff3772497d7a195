// Dependencies (libblitz 0.3): pool.run(kernel, arg, {after: [...]}) starts
// once its Events are set and its Promises fulfilled; Events are set from
// JavaScript; a failed predecessor cancels the call; an unset event never
// keeps an env's teardown or the process from ending.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { blitz, importBlitz, isPending, kernel, newGate, openGate, runChild, waitUntil } from './helpers.mjs';

const pool = new blitz.Pool({ threads: 2 });
test.after(() => pool.close());

test('a call after an Event starts once JavaScript sets it', async () => {
  const event = new blitz.Event();
  const gate = newGate();
  openGate(gate); // the kernel returns at once when it runs
  const call = pool.run(kernel('blzt_gate'), gate, { after: [event] });
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.ok(await isPending(call));
  assert.equal(Atomics.load(gate, 1), 0, 'not started before the set');
  event.set();
  await call;
  assert.equal(Atomics.load(gate, 1), 1);
  event.close();
});

test('a call after other calls (their Promises) starts once both resolved', async () => {
  const first = newGate();
  const second = newGate();
  const last = newGate();
  openGate(last);
  const a = pool.run(kernel('blzt_gate'), first);
  const b = pool.run(kernel('blzt_gate'), second);
  const after = pool.run(kernel('blzt_gate'), last, { after: [a, b] });
  await waitUntil(() => Atomics.load(first, 1) === 1 && Atomics.load(second, 1) === 1, 'both started');
  openGate(first);
  await a;
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(Atomics.load(last, 1), 0, 'waits for the second too');
  openGate(second);
  await after;
  assert.equal(Atomics.load(last, 1), 1);
});

test('a failed predecessor cancels the call: set BLZ_ETASK, closed unset, a rejected Promise', async () => {
  const gate = newGate();
  openGate(gate);
  const failed = new blitz.Event();
  const closed = new blitz.Event();
  const calls = [
    pool.run(kernel('blzt_gate'), gate, { after: [failed] }),
    pool.run(kernel('blzt_gate'), gate, { after: [closed] }),
    pool.run(kernel('blzt_gate'), gate, { after: [Promise.reject(new Error('no'))] }),
  ];
  failed.set('BLZ_ETASK');
  closed.close();
  for (const call of calls) await assert.rejects(call, { code: 'BLZ_ECANCELED' });
  assert.equal(Atomics.load(gate, 1), 0, 'no kernel ran');
  failed.close();
});

test('misuse of events is an error, never a crash', async () => {
  const event = new blitz.Event();
  event.set();
  assert.throws(() => event.set(), { code: 'BLZ_EINVAL' });
  assert.throws(() => new blitz.Event().set('BLZ_ENOPE'), { name: 'TypeError' });
  event.close();
  event.close(); // idempotent
  assert.throws(() => event.set(), { code: 'BLZ_EINVAL' });
  await assert.rejects(async () => pool.run(blitz.kernels.noop, undefined, { after: [event] }), { code: 'BLZ_EINVAL' });
  await assert.rejects(async () => pool.run(blitz.kernels.noop, undefined, { after: ['x'] }), { name: 'TypeError' });
  await assert.rejects(async () => pool.run(blitz.kernels.noop, undefined, { after: 'x' }), { name: 'TypeError' });
  assert.throws(() => blitz.Event.prototype.set.call({}), { name: 'TypeError' });
  // The pool still works.
  await pool.run(blitz.kernels.noop, undefined, { after: [] });
});

test('a worker_thread torn down with a call waiting for an unset event ends', async () => {
  const source = `${importBlitz}
    import { parentPort } from 'node:worker_threads';
    const pool = new blitz.Pool({ threads: 1 });
    const never = new blitz.Event();
    pool.run(blitz.kernels.noop, undefined, { after: [never] });
    parentPort.postMessage('waiting');`;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(source)}`));
  await new Promise((resolve, reject) => {
    worker.on('message', resolve);
    worker.on('error', reject);
  });
  await worker.terminate(); // closes the event first, so the teardown's wait ends
});

test('a call waiting for an event keeps the process alive until the event is closed, like any call in flight', async () => {
  const child = await runChild(`${importBlitz}
    const pool = new blitz.Pool({ threads: 1 });
    const never = new blitz.Event();
    pool.run(blitz.kernels.noop, undefined, { after: [never] })
      .catch((error) => console.log(error.code));
    setTimeout(() => never.close(), 100);   // nothing else keeps the loop alive
    console.log('started');`, { timeout: 20000 });
  assert.equal(child.signal, null, child.stderr);
  assert.equal(child.code, 0, child.stderr);
  assert.deepEqual(child.stdout.trim().split('\n'), ['started', 'BLZ_ECANCELED']);
});
