// Lifetimes: close with work in flight, many concurrent calls, and the ends
// of a process (idle exit, pending work, process.exit and an uncaught
// exception while busy, garbage-collected pools), each in a child node.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import zlib from 'node:zlib';
import { assertClean, blitz, importBlitz, isPending, kernel, newGate, openGate, runChild, waitUntil } from './helpers.mjs';

const pool = new blitz.Pool({ threads: 2 });
after(() => pool.close());

test('close waits for the work in flight, refuses new work, then resolves', async () => {
  const p = new blitz.Pool({ threads: 2 });
  const gate = newGate();
  const order = [];
  const calls = Array.from({ length: 4 }, (_, i) => p.run(kernel('blzt_gate'), gate).then(() => order.push(`run${i}`)));
  await waitUntil(() => Atomics.load(gate, 1) === 2, 'two calls run, two wait');
  const closed = p.close().then(() => order.push('close'));
  assert.equal(p.closed, true);
  await assert.rejects(p.run(blitz.kernels.noop), { code: 'BLZ_ESHUTDOWN' });
  assert.throws(() => p.stats(), { code: 'BLZ_ESHUTDOWN' });
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.ok(await isPending(closed), 'close waits while accepted work is blocked');
  assert.deepEqual(order, []);
  openGate(gate);
  await Promise.all([...calls, closed]);
  assert.equal(order.at(-1), 'close', 'close resolved after every accepted call');
  assert.equal(order.length, 5);
  assert.equal(Atomics.load(gate, 3), 4, 'all four accepted calls ran to the end');
});

test('20000 concurrent runs and 100 concurrent crc32 calls all settle correctly', async () => {
  const counter = new Uint32Array(new SharedArrayBuffer(4)); // shared: every call counts in place
  const count = kernel('blzt_count');
  const runs = Array.from({ length: 20000 }, () => pool.run(count, counter));
  const buffers = Array.from({ length: 100 }, (_, i) => randomBytes(1000 + i));
  const crcs = buffers.map((b) => pool.crc32([b, b.subarray(1)]));
  const settled = await Promise.allSettled(runs);
  assert.ok(settled.every((s) => s.status === 'fulfilled' && s.value === counter));
  assert.equal(counter[0], 20000);
  const results = await Promise.all(crcs);
  results.forEach((r, i) => assert.deepEqual(r, [zlib.crc32(buffers[i]), zlib.crc32(buffers[i].subarray(1))]));
  assert.equal(pool.stats().inFlight, 0);
});

test('an idle pool that was never closed does not keep the process alive', async () => {
  const child = await runChild(`${importBlitz}
    const pool = new blitz.Pool({ threads: 2 });
    await pool.run(blitz.kernels.noop);
    console.log('ran');`, { timeout: 15000 });
  assertClean(child, 'idle exit');
  assert.equal(child.code, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'ran');
});

test('pending work keeps the process alive until its promise settles', async () => {
  const child = await runChild(`${importBlitz}
    const pool = new blitz.Pool({ threads: 1 });
    const busy = blitz.nativeFunction(kernelLibrary, 'blzt_busy_ms');
    pool.run(busy, new Float64Array([300, 0])).then(() => console.log('resolved'));`, { timeout: 15000 });
  assertClean(child, 'pending work');
  assert.equal(child.code, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'resolved');
  assert.ok(child.ms >= 300, `the process lived ${child.ms} ms`);
});

test('process.exit while every worker is busy exits at once, without a crash', async () => {
  const child = await runChild(`${importBlitz}
    import { randomBytes } from 'node:crypto';
    const pool = new blitz.Pool({ threads: 2 });
    const busy = blitz.nativeFunction(kernelLibrary, 'blzt_busy_ms');
    for (let i = 0; i < 4; i++) pool.run(busy, new Float64Array([5000, 0]));
    pool.crc32(Array.from({ length: 8 }, () => randomBytes(4 << 20)));
    pool.sort(new Float64Array(1 << 20).map(Math.random));
    setTimeout(() => process.exit(3), 50);`, { timeout: 15000 });
  assertClean(child, 'process.exit while busy');
  assert.equal(child.code, 3);
  assert.ok(child.ms < 4500, `exited after ${child.ms} ms: it must not wait for 5 s kernels`);
});

test('an uncaught exception while busy ends the process with code 1, without a crash', async () => {
  const child = await runChild(`${importBlitz}
    const pool = new blitz.Pool({ threads: 2 });
    const gate = new Int32Array(4);
    for (let i = 0; i < 6; i++) pool.run(blitz.nativeFunction(kernelLibrary, 'blzt_gate'), gate);
    setTimeout(() => { throw new Error('boom while busy'); }, 30);`, { timeout: 15000 });
  assertClean(child, 'uncaught exception');
  assert.equal(child.code, 1);
  assert.match(child.stderr, /boom while busy/);
});

test('pools dropped without close are destroyed by the garbage collector', async () => {
  const child = await runChild(`${importBlitz}
    import fs from 'node:fs';
    const threads = () => fs.readdirSync('/proc/self/task').length;
    const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
    async function make(n) {
      for (let i = 0; i < n; i++) await new blitz.Pool({ threads: 2 }).run(blitz.kernels.noop);
    }
    await make(1); // the first pool starts Node's own lazy threads too
    for (let i = 0; i < 5; i++) { globalThis.gc(); await settle(); }
    const baseline = threads();
    await make(10);
    const peak = threads();
    for (let i = 0; i < 10 && threads() > baseline; i++) { globalThis.gc(); await settle(); }
    console.log(JSON.stringify({ baseline, peak, after: threads() }));`, { args: ['--expose-gc'], timeout: 30000 });
  assertClean(child, 'garbage-collected pools');
  assert.equal(child.code, 0, child.stderr);
  const { baseline, peak, after: afterGc } = JSON.parse(child.stdout);
  assert.ok(peak > baseline, `pools add threads (${baseline} -> ${peak})`);
  assert.ok(afterGc <= baseline, `their workers are gone after gc: ${afterGc} threads, baseline ${baseline}`);
});
