// worker_threads: each env loads the addon and owns its pools; a worker
// that ends, or is terminated while its pool is busy, tears its pools down
// (cancel, wait for the running kernels, destroy) before Node frees its heap.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import { blitz, importBlitz, packageDir, runChild, threadCount, waitUntil } from './helpers.mjs';

const requirePath = path.join(packageDir, 'index.js');

// An ES module worker from source: a data: URL (eval: true is CommonJS only).
function esmWorker(body) {
  const source = `${importBlitz}
    import { parentPort } from 'node:worker_threads';
    ${body}`;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(source)}`));
  const messages = [];
  worker.on('message', (m) => messages.push(m));
  const exited = new Promise((resolve, reject) => {
    worker.on('exit', resolve);
    worker.on('error', reject);
  });
  return { worker, messages, exited };
}

test('two worker_threads with pools of their own compute side by side and exit by themselves', async () => {
  const workers = [1, 2].map((seed) => esmWorker(`
    import zlib from 'node:zlib';
    const pool = new blitz.Pool({ threads: 2 });
    const bufs = Array.from({ length: 200 }, (_, i) => Buffer.alloc(1000 + i * ${seed}, i));
    const crcs = await pool.crc32(bufs);
    const a = Float64Array.from({ length: 100000 }, (_, i) => Math.cos(i * ${seed}));
    const want = a.slice().sort();
    await pool.sort(a);
    parentPort.postMessage({
      crcOk: crcs.every((c, i) => c === zlib.crc32(bufs[i])),
      sortOk: a.every((x, i) => Object.is(x, want[i])),
    });
    // The pool is left open and idle: the worker must still end.`));
  const codes = await Promise.all(workers.map((w) => w.exited));
  assert.deepEqual(codes, [0, 0]);
  for (const w of workers) assert.deepEqual(w.messages, [{ crcOk: true, sortOk: true }]);
});

test('terminating a worker whose pool is busy cancels, waits, and leaves no thread behind', async () => {
  const baseline = threadCount();
  for (let round = 0; round < 4; round++) {
    const w = esmWorker(`
      const pool = new blitz.Pool({ threads: 2 });
      const gate = new Int32Array(4);
      const waitAtGate = blitz.nativeFunction(kernelLibrary, 'blzt_gate');
      for (let i = 0; i < 6; i++) pool.run(waitAtGate, gate);        // never opened
      pool.crc32(Array.from({ length: 4 }, () => Buffer.alloc(8 << 20, 1)));
      pool.sort(new Float64Array(1 << 20).map(Math.random));
      parentPort.postMessage('busy');`);
    await waitUntil(() => w.messages.length === 1, 'the worker is busy');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const started = performance.now();
    await w.worker.terminate();
    const ms = performance.now() - started;
    assert.ok(ms < 5000, `terminate took ${ms.toFixed(0)} ms: the gate tasks must see the cancel`);
    await w.exited;
  }
  // The workers' pools were destroyed with their envs (Node's own worker
  // threads end with them); allow a moment for the OS to reap them.
  await waitUntil(() => threadCount() <= baseline, `threads back to ${baseline} (now ${threadCount()})`, 10000);
  // The main thread's module instance is unaffected.
  const pool = new blitz.Pool({ threads: 1 });
  assert.deepEqual(await pool.crc32([Buffer.from('123456789')]), [0xCBF43926]);
  await pool.close();
});

test('process.exit on the main thread while a worker_thread pool is busy', async () => {
  const child = await runChild(`${importBlitz}
    import { Worker } from 'node:worker_threads';
    const source = ${JSON.stringify(importBlitz)} + \`
      import { parentPort } from 'node:worker_threads';
      const pool = new blitz.Pool({ threads: 2 });
      const gate = new Int32Array(4);
      for (let i = 0; i < 6; i++) pool.run(blitz.nativeFunction(kernelLibrary, 'blzt_gate'), gate);
      parentPort.postMessage('busy');\`;
    const worker = new Worker(new URL('data:text/javascript,' + encodeURIComponent(source)));
    const mainPool = new blitz.Pool({ threads: 1 });
    mainPool.run(blitz.nativeFunction(kernelLibrary, 'blzt_busy_ms'), new Float64Array([5000, 0]));
    worker.on('message', () => process.exit(5));`, { timeout: 20000 });
  assert.equal(child.signal, null, child.stderr);
  assert.doesNotMatch(child.stderr, /Sanitizer|libblitz: fatal|Segmentation/);
  assert.equal(child.code, 5, child.stderr);
  assert.ok(child.ms < 4500, `exited after ${child.ms} ms`);
});

test('a CommonJS worker (eval) can use the package too', async () => {
  const worker = new Worker(`const blitz = require(${JSON.stringify(requirePath)});
    require('node:worker_threads').parentPort.postMessage(blitz.libraryVersion);`, { eval: true });
  const messages = [];
  worker.on('message', (m) => messages.push(m));
  assert.equal(await new Promise((resolve) => worker.on('exit', resolve)), 0);
  assert.deepEqual(messages, [blitz.libraryVersion]);
});
