// The default Pool is the process pool (blz_pool_shared): every default
// Pool, every worker_thread's and any native library in the process share
// one set of workers; closing or tearing down one user leaves the others'
// work running.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { blitz, importBlitz, kernel, newGate, openGate, waitUntil } from './helpers.mjs';

/** The threads of this process libblitz named for the process pool ("blz-0", ...). */
function processPoolThreads() {
  return fs.readdirSync('/proc/self/task').filter((task) => {
    try {
      return /^blz-\d+$/.test(fs.readFileSync(`/proc/self/task/${task}/comm`, 'utf8').trim());
    } catch {
      return false; // the thread ended meanwhile
    }
  }).length;
}

test('default Pools share the process pool: one set of workers, one set of counters', async () => {
  const a = new blitz.Pool();
  const b = new blitz.Pool({ threads: 0 });
  assert.equal(a.threads, b.threads);
  const expected = Number(process.env.BLZ_NUM_THREADS) || (await import('node:os')).availableParallelism();
  assert.equal(a.threads, expected);
  const before = b.stats().jobsExecuted;
  await Promise.all(Array.from({ length: 30 }, () => a.run(blitz.kernels.noop)));
  assert.ok(b.stats().jobsExecuted >= before + 30, "b's counters see a's jobs: the same pool");
  // A worker names itself once it runs: wait (a guard) for the names, then never more.
  await waitUntil(() => processPoolThreads() >= a.threads, 'the workers have named themselves');
  assert.equal(processPoolThreads(), a.threads, 'one set of workers, not one per Pool');
  // Asking for the size it has is the same pool; another size is refused, not a second pool.
  const c = new blitz.Pool({ threads: a.threads, shared: true });
  assert.throws(() => new blitz.Pool({ threads: a.threads + 1, shared: true }), { code: 'BLZ_EINVAL' });
  // shared: false is a pool of its own.
  const own = new blitz.Pool({ shared: false });
  assert.equal(own.threads, a.threads);
  await own.run(blitz.kernels.noop);
  assert.equal(processPoolThreads(), a.threads);
  assert.throws(() => new blitz.Pool({ shared: 'yes' }), { name: 'TypeError' });
  await Promise.all([a.close(), b.close(), c.close(), own.close()]);
});

test("closing one default Pool leaves another's running call alone", async () => {
  const a = new blitz.Pool();
  const b = new blitz.Pool();
  const gate = newGate();
  const running = b.run(kernel('blzt_gate'), gate);
  await waitUntil(() => Atomics.load(gate, 1) === 1, 'the gate task started');
  await a.close(); // gives up a's reference only
  openGate(gate);
  await running;
  assert.deepEqual(Array.from(gate), [1, 1, 0, 1], 'ran to its end, not cancelled');
  assert.deepEqual(await b.crc32([Buffer.from('123456789')]), [0xCBF43926]);
  await b.close();
});

test('a worker_thread torn down with calls in flight on the process pool: its calls end first, the main thread goes on', async () => {
  const main = new blitz.Pool();
  const mainGate = newGate();
  const mainCall = main.run(kernel('blzt_gate'), mainGate);
  for (let round = 0; round < 3; round++) {
    const source = `${importBlitz}
      import { parentPort } from 'node:worker_threads';
      const pool = new blitz.Pool();
      const gate = new Int32Array(4);
      for (let i = 0; i < 4; i++) pool.run(blitz.nativeFunction(kernelLibrary, 'blzt_gate'), gate);
      pool.sort(new Float64Array(1 << 18).map(Math.random));
      parentPort.postMessage(pool.threads);`;
    const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(source)}`));
    const threads = await new Promise((resolve, reject) => {
      worker.on('message', resolve);
      worker.on('error', reject);
    });
    assert.equal(threads, main.threads);
    // The teardown cancels the worker's gate tasks and waits for their
    // on_done before giving its reference up: no worker touches its heap after.
    await worker.terminate();
  }
  assert.equal(Atomics.load(mainGate, 2), 0, "the main thread's call was not cancelled");
  openGate(mainGate);
  await mainCall;
  assert.equal(processPoolThreads(), main.threads);
  await main.close();
});
