#!/usr/bin/env node
/*
 * The Node binding's benchmark (issue 16), run by `./dev bench node`:
 *
 *   node bindings/node/bench/hash.mjs [--build-dir build] [--runs 5] [--quick] [--out FILE]
 *
 * 1. Hashing many buffers with CRC-32, the same C kernel (src/kernels.c)
 *    on each pool, 1 and 2 workers:
 *      - libblitz, one pool.crc32 call for all buffers (one promise, one
 *        task whose blz_parallel_for hashes a buffer per piece), and one
 *        call per buffer (a promise each); the buffers are views of a
 *        SharedArrayBuffer, which the addon hashes in place, and again
 *        plain buffers, which it copies for the call (the cost of copying);
 *      - Node's libuv threadpool (UV_THREADPOOL_SIZE = workers), one
 *        napi_async_work per buffer (what an addon does without
 *        libblitz), with one promise for all buffers or one per buffer;
 *      - worker_threads, each worker hashing a contiguous share of the
 *        buffers (shared memory, one message each way per worker: the
 *        best case for workers; their start-up is not timed);
 *    and, as context, Node's own crypto on the libuv pool
 *    (crypto.subtle.digest SHA-256 per buffer: another hash, so only its
 *    scaling and dispatch cost compare) and the sequential kernel and
 *    zlib.crc32 on the main thread.
 *    Wall time, process CPU time (process.cpuUsage: every thread) and
 *    CPU/wall; every CRC is checked against the sequential kernel's.
 * 2. The round trip of an empty native function: await pool.run(noop),
 *    one at a time, against setImmediate (the event loop's floor) and an
 *    empty libuv work item.
 *
 * Every configuration runs in a fresh child process (UV_THREADPOOL_SIZE
 * must be set before libuv's pool starts), interleaved run by run, --runs
 * times (medians). Writes the figures as JSON to --out (default:
 * bindings/node/bench/results.json) and prints the tables.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const packageDir = path.resolve(here, '..');
const repoRoot = path.resolve(packageDir, '..', '..');

function parseArgs(argv) {
  const opts = { buildDir: path.join(repoRoot, 'build'), runs: 5, quick: false,
    out: path.join(here, 'results.json'), child: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--build-dir') opts.buildDir = path.resolve(argv[++i]);
    else if (a === '--runs') opts.runs = Number(argv[++i]);
    else if (a === '--quick') opts.quick = true;
    else if (a === '--out') opts.out = path.resolve(argv[++i]);
    else if (a === '--child') opts.child = JSON.parse(argv[++i]);
    else throw new Error(`unknown argument ${a}`);
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
if (!process.env.BLITZ_NODE_ADDON) {
  process.env.BLITZ_NODE_ADDON = path.join(opts.buildDir, 'bindings', 'node', 'blitz_node.node');
}
const { default: blitz } = await import(path.join(packageDir, 'index.js'));
// The libuv comparison: a module built beside the addon for this benchmark
// only (bench/uv_crc32.c), not part of the package.
const { createRequire } = await import('node:module');
const uvBench = createRequire(import.meta.url)(path.join(opts.buildDir, 'bindings', 'node', 'blitz_node_bench.node'));

// ---- the measured side: one configuration per child process ----

/* Deterministic contents (xorshift), so every child hashes the same bytes. */
function makeBuffers(count, size) {
  const shared = new SharedArrayBuffer(count * size);
  const words = new Uint32Array(shared);
  let x = 0x9E3779B9;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    words[i] = x >>> 0;
  }
  return { shared, buffers: Array.from({ length: count }, (_, i) => Buffer.from(shared, i * size, size)) };
}

function startWorkers(n, shared, count, size) {
  const source = `
    const { parentPort } = require('node:worker_threads');
    const blitz = require(${JSON.stringify(path.join(packageDir, 'index.js'))});
    parentPort.on('message', ({ shared, from, to, size }) => {
      const out = new Array(to - from);
      for (let i = from; i < to; i++) out[i - from] = blitz.crc32Sync(new Uint8Array(shared, i * size, size));
      parentPort.postMessage(out);
    });`;
  return import('node:worker_threads').then(({ Worker }) => {
    const workers = Array.from({ length: n }, () => new Worker(source, { eval: true }));
    const share = Math.ceil(count / n);
    const run = () => Promise.all(workers.map((w, k) => new Promise((resolve) => {
      w.once('message', resolve);
      w.postMessage({ shared, from: Math.min(k * share, count), to: Math.min((k + 1) * share, count), size });
    }))).then((parts) => parts.flat());
    // One untimed round: the workers have loaded the addon and are warm.
    return run().then(() => ({ run, stop: () => Promise.all(workers.map((w) => w.terminate())) }));
  });
}

async function measureHash(cfg) {
  const { buffers, shared } = makeBuffers(cfg.count, cfg.size);
  const expected = buffers.map((b) => blitz.crc32Sync(b));
  let run;
  let cleanup = async () => {};
  if (cfg.impl.startsWith('blitz-one-call') || cfg.impl.startsWith('blitz-per-buffer')) {
    // '-plain': the same bytes in plain ArrayBuffers, which the addon
    // copies for the call (src/args.c, take_bytes); the others are views
    // of a SharedArrayBuffer, used in place.
    const inputs = cfg.impl.endsWith('-plain') ? buffers.map((b) => new Uint8Array(b)) : buffers;
    const pool = new blitz.Pool({ threads: cfg.workers });
    run = cfg.impl.startsWith('blitz-one-call')
      ? () => pool.crc32(inputs)
      : () => Promise.all(inputs.map((b) => pool.crc32([b]))).then((r) => r.flat());
    cleanup = () => pool.close();
  } else if (cfg.impl === 'libuv-one-call') {
    run = () => uvBench.uvCrc32(buffers);
  } else if (cfg.impl === 'libuv-per-buffer') {
    run = () => Promise.all(buffers.map((b) => uvBench.uvCrc32([b]))).then((r) => r.flat());
  } else if (cfg.impl === 'worker_threads') {
    const w = await startWorkers(cfg.workers, shared, cfg.count, cfg.size);
    run = w.run;
    cleanup = w.stop;
  } else if (cfg.impl === 'crypto-sha256') {
    // WebCrypto refuses views of shared memory: plain copies of the same bytes.
    const { webcrypto } = await import('node:crypto');
    const copies = buffers.map((b) => Buffer.from(b));
    run = () => Promise.all(copies.map((b) => webcrypto.subtle.digest('SHA-256', b))).then(() => null);
  } else if (cfg.impl === 'sequential') {
    run = async () => buffers.map((b) => blitz.crc32Sync(b));
  } else if (cfg.impl === 'zlib.crc32') {
    const zlib = await import('node:zlib');
    run = async () => buffers.map((b) => zlib.crc32(b));
  } else {
    throw new Error(`unknown impl ${cfg.impl}`);
  }
  const results = [];
  for (let rep = 0; rep < cfg.reps + 1; rep++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const crcs = await run();
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    if (crcs !== null && (crcs.length !== expected.length || crcs.some((c, i) => c !== expected[i]))) {
      throw new Error(`${cfg.impl}: wrong CRCs`);
    }
    if (rep > 0) results.push({ wallMs: wall, cpuMs: (cpu.user + cpu.system) / 1000 }); // rep 0 warms up
  }
  await cleanup();
  return results;
}

async function measureLatency(cfg) {
  const samples = [];
  let once;
  let cleanup = async () => {};
  if (cfg.impl === 'blitz-run-noop') {
    const pool = new blitz.Pool({ threads: cfg.workers });
    once = () => pool.run(blitz.kernels.noop);
    cleanup = () => pool.close();
  } else if (cfg.impl === 'setImmediate') {
    once = () => new Promise((resolve) => setImmediate(resolve));
  } else if (cfg.impl === 'libuv-empty-work') {
    const empty = [Buffer.alloc(0)];
    once = () => uvBench.uvCrc32(empty);
  }
  for (let i = 0; i < cfg.warmup; i++) await once();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < cfg.calls; i++) {
    const s = performance.now();
    await once();
    samples.push((performance.now() - s) * 1000);
  }
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await cleanup();
  samples.sort((a, b) => a - b);
  const q = (p) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))];
  return [{ p50Us: q(0.5), p99Us: q(0.99), meanUs: samples.reduce((a, b) => a + b, 0) / samples.length,
    wallMs: wall, cpuMs: (cpu.user + cpu.system) / 1000 }];
}

if (opts.child) {
  const cfg = opts.child;
  const results = cfg.kind === 'hash' ? await measureHash(cfg) : await measureLatency(cfg);
  process.stdout.write(JSON.stringify(results) + '\n');
  process.exit(0);
}

// ---- the driver ----

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function runChild(cfg) {
  const env = { ...process.env };
  if (cfg.impl.startsWith('libuv') || cfg.impl === 'crypto-sha256') {
    env.UV_THREADPOOL_SIZE = String(cfg.workers);
  }
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [fileURLToPath(import.meta.url), '--build-dir', opts.buildDir, '--child', JSON.stringify(cfg)],
      { env, maxBuffer: 1 << 24, timeout: 600000 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`${cfg.impl} (${cfg.workers} workers): ${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').at(-1)));
      });
  });
}

const hashCases = opts.quick
  ? [{ name: '256 buffers of 16 KiB', count: 256, size: 16 << 10, reps: 1 }]
  : [{ name: '4096 buffers of 64 KiB (256 MiB)', count: 4096, size: 64 << 10, reps: 2 },
     { name: '65536 buffers of 1 KiB (64 MiB)', count: 65536, size: 1 << 10, reps: 2 }];
const pooled = ['blitz-one-call', 'blitz-one-call-plain', 'libuv-one-call', 'blitz-per-buffer', 'blitz-per-buffer-plain',
  'libuv-per-buffer', 'worker_threads', 'crypto-sha256'];
const latencyCalls = opts.quick ? 200 : 5000;

const configs = [];
for (const c of hashCases) {
  for (const workers of [1, 2]) {
    for (const impl of pooled) configs.push({ kind: 'hash', case: c.name, impl, workers, count: c.count, size: c.size, reps: c.reps });
  }
  for (const impl of ['sequential', 'zlib.crc32']) {
    configs.push({ kind: 'hash', case: c.name, impl, workers: 0, count: c.count, size: c.size, reps: c.reps });
  }
}
for (const workers of [1, 2]) {
  for (const impl of ['blitz-run-noop', 'libuv-empty-work']) {
    configs.push({ kind: 'latency', impl, workers, calls: latencyCalls, warmup: latencyCalls / 10 });
  }
}
configs.push({ kind: 'latency', impl: 'setImmediate', workers: 0, calls: latencyCalls, warmup: latencyCalls / 10 });

/*
 * What the machine delivers: two threads that spin for 300 ms each, CPU
 * time over wall time of the process. Below 1.9, another load shares the
 * CPUs, and no 2-worker figure of the run is a two-CPU figure (the rule of
 * bench/run.py and docs/benchmarks.md).
 */
async function deliveredCpus(ms = 300) {
  const { Worker } = await import('node:worker_threads');
  const spin = `const t0 = performance.now(); while (performance.now() - t0 < ${ms});`;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all([0, 1].map(() => new Promise((resolve) => new Worker(spin, { eval: true }).on('exit', resolve))));
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / 1000 / (performance.now() - t0);
}

const key = (c) => `${c.kind}|${c.case || ''}|${c.impl}|${c.workers}`;
const samples = new Map(configs.map((c) => [key(c), []]));
const started = Date.now();
const delivered = [await deliveredCpus()];
for (let round = 0; round < opts.runs; round++) {
  // Rotate the order each round, so that no configuration always runs first.
  const order = configs.map((_, i) => configs[(i + round * 7) % configs.length]);
  for (const cfg of order) {
    // A 2-worker run counts only if the machine gave two CPUs just before it.
    const before = cfg.kind === 'hash' && cfg.workers === 2 ? await deliveredCpus(150) : null;
    for (const sample of await runChild(cfg)) samples.get(key(cfg)).push({ ...sample, deliveredBefore: before });
  }
  delivered.push(await deliveredCpus());
  console.error(`bench: round ${round + 1}/${opts.runs} done (${((Date.now() - started) / 1000).toFixed(0)} s); ` +
    `2 spinning threads got ${delivered.at(-1).toFixed(2)} CPUs`);
}

const cpuModel = (os.cpus()[0] || {}).model || 'unknown';
const QUALIFY = 1.9; // bench/run.py's rule: CPU/wall of a 2-worker run below 1.9 is not a two-CPU figure
const rows = configs.map((cfg) => {
  const all = samples.get(key(cfg));
  const good = all.filter((x) => x.deliveredBefore === null || x.deliveredBefore >= QUALIFY);
  const s = good.length ? good : all;
  const pick = (f) => median(s.map((x) => x[f]).filter((v) => v !== undefined));
  const row = { ...cfg, samples: all.length, qualified: good.length, wallMs: pick('wallMs'), cpuMs: pick('cpuMs'),
    cpuPerWall: median(s.map((x) => x.cpuMs / x.wallMs)) };
  if (cfg.kind === 'hash') row.gbPerS = (cfg.count * cfg.size) / (row.wallMs / 1000) / 1e9;
  else Object.assign(row, { p50Us: pick('p50Us'), p99Us: pick('p99Us'), meanUs: pick('meanUs') });
  return row;
});

const label = { 'blitz-one-call': 'libblitz, 1 call (1 task, parallelFor over the buffers)',
  'blitz-one-call-plain': 'the same, plain (non-shared) buffers: copied for the call',
  'blitz-per-buffer-plain': 'the same, plain (non-shared) buffers: copied for the call',
  'libuv-one-call': 'libuv pool, 1 call (1 napi_async_work per buffer)',
  'blitz-per-buffer': 'libblitz, 1 call (promise) per buffer', 'libuv-per-buffer': 'libuv pool, 1 call (promise) per buffer',
  worker_threads: 'worker_threads (shared memory, static split)',
  'crypto-sha256': 'crypto.subtle SHA-256 on the libuv pool (another hash)', sequential: 'the same kernel, main thread, sequential',
  'zlib.crc32': "zlib.crc32 (Node's zlib), main thread", 'blitz-run-noop': 'await pool.run(noop)',
  'libuv-empty-work': 'empty napi_async_work (libuv pool)', setImmediate: 'await setImmediate (the floor)' };

const lines = [];
lines.push(`CPU: ${cpuModel}, ${os.cpus().length} CPUs; Node ${process.version}; libblitz ${blitz.libraryVersion}; ` +
  `median of ${opts.runs} runs in fresh processes${opts.quick ? ' (--quick sizes)' : ''}`);
lines.push(`Two spinning threads got ${Math.min(...delivered).toFixed(2)}-${Math.max(...delivered).toFixed(2)} CPUs ` +
  '(CPU/wall) between rounds. A 2-worker run counts only if two spinning threads got at least ' +
  `${QUALIFY} CPUs right before it ("runs": counted/all; the timed repetitions of each run count separately); ` +
  'with none, the row shows all runs, marked CPU short.');
for (const c of hashCases) {
  lines.push('', `CRC-32 of ${c.name}`, '', '| pool | workers | wall ms | GB/s | CPU ms | CPU/wall | runs |',
    '|---|---|---|---|---|---|---|');
  for (const r of rows.filter((x) => x.kind === 'hash' && x.case === c.name)) {
    const runs = r.workers === 2 ? (r.qualified ? `${r.qualified}/${r.samples}` : `0/${r.samples}: CPU short`) : `${r.samples}`;
    lines.push(`| ${label[r.impl]} | ${r.workers || '-'} | ${r.wallMs.toFixed(1)} | ${r.gbPerS.toFixed(2)} | ${r.cpuMs.toFixed(1)} | ${r.cpuPerWall.toFixed(2)} | ${runs} |`);
  }
}
lines.push('', `Round trip of an empty function, ${latencyCalls} calls one after another`, '',
  '| what | workers | p50 µs | p99 µs | mean µs | CPU/wall |', '|---|---|---|---|---|---|');
for (const r of rows.filter((x) => x.kind === 'latency')) {
  lines.push(`| ${label[r.impl]} | ${r.workers || '-'} | ${r.p50Us.toFixed(1)} | ${r.p99Us.toFixed(1)} | ${r.meanUs.toFixed(1)} | ${r.cpuPerWall.toFixed(2)} |`);
}
console.log(lines.join('\n'));
fs.writeFileSync(opts.out, JSON.stringify({
  generated: new Date().toISOString(), cpu: cpuModel, cpus: os.cpus().length, node: process.version,
  libblitz: blitz.libraryVersion, runs: opts.runs, quick: opts.quick, loadavg: os.loadavg(), deliveredCpus: delivered, rows,
}, null, 1) + '\n');
console.error(`bench: wrote ${path.relative(process.cwd(), opts.out)}`);
