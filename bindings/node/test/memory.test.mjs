// Which memory a kernel works on: a SharedArrayBuffer's bytes in place
// (zero-copy, shared with JavaScript while the kernel runs), anything else
// through the call's own copy, written back when the call settles.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import zlib from 'node:zlib';
import { blitz, kernel } from './helpers.mjs';

const pool = new blitz.Pool({ threads: 2 });
after(() => pool.close());

test("a plain buffer is the call's copy: the kernel's writes arrive when the call settles", async () => {
  const arg = new Float64Array([100, 0]); // [ms, set to 1 once the kernel started]
  const call = pool.run(kernel('blzt_busy_ms'), arg);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(arg[1], 0, 'not while the kernel runs');
  assert.equal(await call, arg);
  assert.equal(arg[1], 1, 'once the promise resolved');
});

test('concurrent calls on one plain buffer write back their own copies; on shared memory they share', async () => {
  const count = kernel('blzt_count');
  const plain = new Uint32Array(1);
  await Promise.all(Array.from({ length: 50 }, () => pool.run(count, plain)));
  assert.equal(plain[0], 1, 'each call counted once in its copy of 0, and the copies were written back');
  const shared = new Uint32Array(new SharedArrayBuffer(4));
  await Promise.all(Array.from({ length: 50 }, () => pool.run(count, shared)));
  assert.equal(shared[0], 50);
});

test('slices of one SharedArrayBuffer, and a growable one grown meanwhile, are hashed in place', async () => {
  const shared = new SharedArrayBuffer(1000 * 1000);
  const bytes = new Uint8Array(shared);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31) & 255;
  const slices = Array.from({ length: 1000 }, (_, i) => Buffer.from(shared, i * 1000, 1000));
  const growable = new SharedArrayBuffer(1 << 20, { maxByteLength: 4 << 20 });
  new Uint8Array(growable).fill(9);
  const call = pool.crc32([...slices, new Uint8Array(growable)]);
  growable.grow(4 << 20); // a growable SharedArrayBuffer only grows, in place
  const crcs = await call;
  assert.deepEqual(crcs.slice(0, 1000), slices.map((b) => zlib.crc32(b)));
  assert.equal(crcs[1000], zlib.crc32(Buffer.alloc(1 << 20, 9)));
});

test('map between overlapping views computes from the input as it was at the call', async () => {
  const a = Float64Array.from({ length: 100000 }, (_, i) => i);
  await pool.map(a.subarray(0, a.length - 1), { mul: 1, add: 0 }, { output: a.subarray(1), grain: 1000 });
  assert.equal(a[0], 0);
  for (let i = 1; i < a.length; i++) assert.equal(a[i], i - 1, `element ${i}: shifted by one`);
});

test('an aborted map leaves a plain output as it was', async () => {
  // Long enough (milliseconds of work) that the abort, microseconds after
  // the call, finds it running.
  const input = new Float64Array(1 << 22).fill(4);
  const output = new Float64Array(1 << 22).fill(-1);
  const controller = new AbortController();
  const call = pool.map(input, 'sqrt', { output, grain: 1024, signal: controller.signal });
  controller.abort();
  await assert.rejects(call, { name: 'AbortError' });
  assert.ok(output.every((x) => x === -1));
});

test('an abort after the kernel finished, before the call settled, still leaves a plain output as it was', async () => {
  const input = new Float64Array(1024).fill(4);
  const output = new Float64Array(1024).fill(-1);
  const controller = new AbortController();
  const call = pool.map(input, 'sqrt', { output, signal: controller.signal });
  // The loop thread is busy here, so the call cannot settle, while the
  // workers finish the 1024-element map long before the 200 ms are up.
  const until = Date.now() + 200;
  while (Date.now() < until);
  controller.abort();
  await assert.rejects(call, { name: 'AbortError' });
  assert.ok(output.every((x) => x === -1), 'an aborted call writes nothing back');
});
