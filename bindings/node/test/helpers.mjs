// Shared by the test files: the package under test, the test kernels, and
// small tools (waiting for a condition, running a child node).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import blitz from '../index.js';

export { blitz };
export const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// The C kernels of test/kernels.c, built by meson ($BLITZ_NODE_TEST_KERNELS).
export const kernelLibrary = process.env.BLITZ_NODE_TEST_KERNELS;
if (!kernelLibrary || !fs.existsSync(kernelLibrary)) {
  throw new Error('BLITZ_NODE_TEST_KERNELS must name the built test kernels (meson test -C BUILD --suite node)');
}

// The libuv comparison module (bench/uv_crc32.c, $BLITZ_NODE_BENCH): not
// in the package, tested here because it reads its arguments as calls do.
export const uvBenchModule = process.env.BLITZ_NODE_BENCH;
if (!uvBenchModule || !fs.existsSync(uvBenchModule)) {
  throw new Error('BLITZ_NODE_BENCH must name the built bench module (meson test -C BUILD --suite node)');
}
const uvBench = createRequire(import.meta.url)(uvBenchModule);
/** crc32 of each buffer on Node's libuv threadpool, one napi_async_work per buffer. */
export const uvCrc32 = (buffers) => uvBench.uvCrc32(buffers);

export function kernel(symbol, kind = 'task') {
  return blitz.nativeFunction(kernelLibrary, symbol, kind);
}

/**
 * Int32Array [open, started, stoppedByCancel, finished] for blzt_gate, on a
 * SharedArrayBuffer: the only memory a kernel shares with JavaScript while
 * it runs (other buffers are copied for the call).
 */
export function newGate() {
  return new Int32Array(new SharedArrayBuffer(16));
}

export function openGate(gate) {
  Atomics.store(gate, 0, 1);
}

/** Resolves once predicate() is true; rejects after `ms` (a guard, not a measurement). */
export async function waitUntil(predicate, what, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** true when the promise is still pending after the current macrotask. */
export async function isPending(promise) {
  const marker = Symbol('pending');
  const winner = await Promise.race([promise.then(() => 'settled', () => 'settled'),
    new Promise((resolve) => setImmediate(() => resolve(marker)))]);
  return winner === marker;
}

/**
 * Runs an ES module script in a child node (same environment: the addon
 * path, and the sanitizer preload in sanitized builds). Resolves to
 * {code, signal, stdout, stderr, ms}.
 */
export function runChild(script, { args = [], timeout = 30000 } = {}) {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [...args, '--input-type=module', '-e', script],
      { cwd: packageDir, timeout, env: process.env },
      (error, stdout, stderr) => {
        resolve({ code: error ? error.code ?? null : 0, signal: error ? error.signal ?? null : null,
          killed: Boolean(error && error.killed), stdout, stderr, ms: Date.now() - started });
      });
  });
}

/** A child that crashed shows it here: a signal, a timeout, or a sanitizer's report. */
export function assertClean(child, what) {
  assert.equal(child.signal, null, `${what}: killed by ${child.signal}\n${child.stderr}`);
  assert.equal(child.killed, false, `${what}: timed out\n${child.stderr}`);
  assert.doesNotMatch(child.stderr, /Sanitizer|libblitz: fatal|Segmentation|core dumped/, what);
}

/** The number of threads of this process (Linux). */
export function threadCount() {
  return fs.readdirSync('/proc/self/task').length;
}

/** The import statement a child script or a worker (a data: module, which
 * can import absolute URLs only) starts with. */
export const importBlitz = `import blitz from ${JSON.stringify(pathToFileURL(path.join(packageDir, 'index.js')).href)};
const kernelLibrary = ${JSON.stringify(kernelLibrary)};`;
