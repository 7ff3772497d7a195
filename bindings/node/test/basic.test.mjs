// The shape of the API: run, parallelFor and stats resolve with what they
// promise, on the pool's workers, without blocking the event loop.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { blitz, isPending, kernel, newGate, openGate, waitUntil } from './helpers.mjs';

const pool = new blitz.Pool({ threads: 2 });
after(() => pool.close());

test('run resolves to its arg after the C function ran on a worker thread', async () => {
  const out = new Float64Array(1);
  const value = await pool.run(kernel('blzt_thread_id'), out);
  assert.equal(value, out);
  assert.ok(out[0] > 0, 'the kernel wrote its thread id');
  // On Linux the main thread's id is the process id.
  assert.notEqual(out[0], process.pid, 'it ran on a worker, not on the loop thread');
});

test('run without an arg passes NULL and resolves to undefined', async () => {
  assert.equal(await pool.run(blitz.kernels.noop), undefined);
  assert.equal(await pool.run(blitz.kernels.noop, null), null);
});

test('run passes the bytes of a view at its offset', async () => {
  const backing = new Uint32Array(8);
  const view = backing.subarray(5, 6);
  await pool.run(kernel('blzt_count'), view);
  await pool.run(kernel('blzt_count'), new DataView(backing.buffer, 3 * 4, 4));
  assert.deepEqual([...backing], [0, 0, 0, 1, 0, 1, 0, 0]);
});

test('parallelFor calls the body on disjoint ranges covering [begin, end) once', async () => {
  const counts = new Uint32Array(100000);
  const value = await pool.parallelFor(0, counts.length, kernel('blzt_mark', 'range'), counts, { grain: 1000 });
  assert.equal(value, counts);
  assert.ok(counts.every((c) => c === 1), 'every index exactly once');

  counts.fill(0);
  await pool.parallelFor(10, 20, kernel('blzt_mark', 'range'), counts);
  assert.deepEqual([...counts.subarray(8, 22)], [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]);
  assert.equal(counts.reduce((a, b) => a + b, 0), 10);

  counts.fill(0);
  await pool.parallelFor(7, 7, kernel('blzt_mark', 'range'), counts);
  assert.equal(counts.reduce((a, b) => a + b, 0), 0, 'an empty range calls nothing');
});

test('parallelFor writes every element through a C loop body', async () => {
  const a = new Float64Array(250000);
  await pool.parallelFor(0, a.length, kernel('blzt_squares', 'range'), a);
  for (let i = 0; i < a.length; i += 997) assert.equal(a[i], i * i);
  assert.equal(a[a.length - 1], (a.length - 1) ** 2);
});

test('the loop keeps turning while the workers are busy, and run never blocks it', async () => {
  const gate = newGate();
  const blocked = [pool.run(kernel('blzt_gate'), gate), pool.run(kernel('blzt_gate'), gate)];
  await waitUntil(() => Atomics.load(gate, 1) === 2, 'both workers are held at the gate');
  const started = performance.now();
  const queued = Array.from({ length: 200 }, () => pool.run(blitz.kernels.noop));
  const spent = performance.now() - started;
  assert.ok(spent < 1000, `200 runs were queued in ${spent.toFixed(1)} ms without waiting for a worker`);
  let ticks = 0;
  await new Promise((resolve) => {
    const tick = () => (++ticks < 20 ? setImmediate(tick) : resolve());
    setImmediate(tick);
  });
  assert.equal(ticks, 20, 'the loop ran 20 turns');
  assert.ok(await isPending(queued[0]), 'queued work waits for a free worker');
  openGate(gate);
  await Promise.all([...blocked, ...queued]);
});

test('stats reports the pool and counts its jobs', async () => {
  const before = pool.stats();
  assert.equal(before.threads, 2);
  for (const key of ['sleepingNow', 'inactiveNow', 'jobsExecuted', 'jobsInjected', 'steals', 'sleeps', 'wakeups',
    'spuriousWakeups', 'sleepAborts', 'tasksFailed', 'inFlight']) {
    assert.equal(typeof before[key], 'number', key);
  }
  await Promise.all(Array.from({ length: 50 }, () => pool.run(blitz.kernels.noop)));
  const afterRuns = pool.stats();
  assert.ok(afterRuns.jobsExecuted >= before.jobsExecuted + 50, 'each run is at least one job');
  assert.ok(afterRuns.jobsInjected >= before.jobsInjected + 50, 'submitted from outside the pool');
  assert.equal(afterRuns.inFlight, 0);
});

test('threads: as asked, or one per CPU by default', async () => {
  const one = new blitz.Pool({ threads: 1 });
  assert.equal(one.threads, 1);
  assert.equal(one.stats().threads, 1);
  await one.close();
  const dflt = new blitz.Pool();
  const expected = Number(process.env.BLZ_NUM_THREADS) || (await import('node:os')).availableParallelism();
  assert.equal(dflt.threads, expected);
  await dflt.close();
});

test('the ESM entry exports the same objects as require', async () => {
  const esm = await import('../index.mjs');
  assert.equal(esm.Pool, blitz.Pool);
  assert.equal(esm.default, blitz);
  assert.equal(esm.kernels.noop, blitz.kernels.noop);
  assert.match(esm.libraryVersion, /^0\.\d+\.\d+$/);
});

test('the package has no libuv comparison: the addon exports no uvCrc32 (bench/uv_crc32.c does)', async () => {
  const { createRequire } = await import('node:module');
  const addon = createRequire(import.meta.url)(blitz.addonPath);
  assert.equal(typeof addon.crc32, 'function', 'the addon itself');
  assert.equal(addon.uvCrc32, undefined);
  assert.equal(blitz.libuv, undefined);
});
