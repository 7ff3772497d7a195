// Memory safety from hostile JavaScript: every attack runs in a child node
// (with --expose-gc), so that a crash is this test's failure and not the
// suite's end. Each child prints what its calls settled with; nothing may
// crash, and a call whose output memory went away must say so.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertClean, importBlitz, runChild, uvBenchModule } from './helpers.mjs';

// The common start of every child: a pool of two, the late-writing kernel
// (blzt_fill_late: waits 150 ms, then writes byte i = i mod 256), and the
// outcome of a promise as a short string.
const prelude = `${importBlitz}
  import zlib from 'node:zlib';
  const pool = new blitz.Pool({ threads: 2 });
  const fillLate = blitz.nativeFunction(kernelLibrary, 'blzt_fill_late', 'range');
  const outcome = (p) => p.then(() => 'resolved', (e) => e.code ?? String(e));
  const filled = (bytes) => bytes.every((b, i) => b === (i & 255));
  // The libuv comparison (bench/uv_crc32.c), behind a check of each element
  // in JavaScript first, as a wrapper would make: the module must read the
  // elements itself, not trust what the check saw.
  const uvBench = (await import('node:module')).createRequire(${JSON.stringify(uvBenchModule)})(${JSON.stringify(uvBenchModule)});
  const uvCrc32 = (list) => {
    list.forEach((b) => { if (!ArrayBuffer.isView(b)) throw new TypeError('not bytes'); });
    return uvBench.uvCrc32(list);
  };`;

async function hostileChild(body, timeout = 60000) {
  const child = await runChild(`${prelude}\n${body}`, { args: ['--expose-gc'], timeout });
  assertClean(child, 'hostile child');
  assert.equal(child.code, 0, child.stderr);
  return JSON.parse(child.stdout);
}

test('a view of a resizable buffer with a shadowed .buffer, shrunk while its kernel writes', async () => {
  const result = await hostileChild(`
    const size = 1 << 20;
    const shrunk = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      const rab = new ArrayBuffer(size, { maxByteLength: size });
      const view = new Uint8Array(rab);
      Object.defineProperty(view, 'buffer', { value: new ArrayBuffer(8) }); // what a JS check would see
      const call = pool.parallelFor(0, size, fillLate, view, { grain: size });
      rab.resize(0);
      shrunk.push(await outcome(call));
    }
    // Not shrunk: the call works on a resizable buffer, and the bytes arrive.
    const kept = new Uint8Array(new ArrayBuffer(size, { maxByteLength: 2 * size }));
    const keptOutcome = await outcome(pool.parallelFor(0, size, fillLate, kept, { grain: size }));
    console.log(JSON.stringify({ shrunk, keptOutcome, keptFilled: filled(kept) }));
    await pool.close();`);
  assert.deepEqual(result.shrunk, Array(4).fill('ERR_BLITZ_DETACHED'),
    'a call whose output shrank away rejects, its bytes dropped');
  assert.equal(result.keptOutcome, 'resolved');
  assert.ok(result.keptFilled, "the kernel's bytes reached the buffer that stayed");
});

test("crc32's list: an index getter answers the check and the addon differently", async () => {
  const result = await hostileChild(`
    const size = 16 << 20;
    const runs = [];
    for (const crc32 of [(list) => pool.crc32(list), (list) => uvCrc32(list)]) {
      for (let attempt = 0; attempt < 3; attempt++) {
        const rab = new ArrayBuffer(size, { maxByteLength: size });
        const view = new Uint8Array(rab);
        for (let i = 0; i < size; i += 4096) view[i] = (i >> 12) * 37 + attempt;
        const want = zlib.crc32(view);
        let reads = 0;
        const list = [];
        Object.defineProperty(list, 0, { get: () => (++reads === 1 ? Buffer.alloc(1) : view) });
        const call = crc32(list);
        rab.resize(0);
        const got = await call;
        runs.push({ reads, same: got.length === 1 && got[0] === want });
      }
    }
    console.log(JSON.stringify(runs));
    await pool.close();`);
  for (const run of result) {
    assert.ok(run.reads >= 2, 'the addon read the element itself');
    assert.ok(run.same, 'the CRC is that of the bytes the buffer held when the call was made');
  }
});

test('an ArrayBuffer transferred away while its kernel writes, and its new owner collected', async () => {
  const result = await hostileChild(`
    const size = 64 << 20;
    const collected = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const ab = new ArrayBuffer(size);
      const call = pool.parallelFor(0, size, fillLate, new Uint8Array(ab), { grain: size });
      let moved = structuredClone(ab, { transfer: [ab] });
      moved = null;
      globalThis.gc();
      collected.push(await outcome(call));
    }
    // The new owner kept: the kernel's writes must not reach memory it owns now.
    const ab = new ArrayBuffer(1 << 20);
    const call = pool.parallelFor(0, 1 << 20, fillLate, new Uint8Array(ab), { grain: 1 << 20 });
    const moved = new Uint8Array(structuredClone(ab, { transfer: [ab] }));
    const keptOutcome = await outcome(call);
    console.log(JSON.stringify({ collected, keptOutcome, movedUntouched: moved.every((b) => b === 0) }));
    await pool.close();`);
  assert.deepEqual(result.collected, Array(3).fill('ERR_BLITZ_DETACHED'));
  assert.equal(result.keptOutcome, 'ERR_BLITZ_DETACHED');
  assert.ok(result.movedUntouched, 'no byte was written into the memory the transfer moved');
});

test('a Float64Array transferred away and collected while sort runs on it', async () => {
  const result = await hostileChild(`
    const outcomes = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const a = new Float64Array(8 << 20);
      for (let i = 0; i < a.length; i++) a[i] = Math.sin(i + attempt);
      const call = pool.sort(a);
      let moved = structuredClone(a.buffer, { transfer: [a.buffer] });
      moved = null;
      globalThis.gc();
      outcomes.push(await outcome(call));
    }
    console.log(JSON.stringify(outcomes));
    await pool.close();`);
  assert.deepEqual(result, Array(3).fill('ERR_BLITZ_DETACHED'));
});

test("map's output: a resizable view with a shadowed .buffer, shrunk while map writes it", async () => {
  const result = await hostileChild(`
    const n = 4 << 20;
    const input = new Float64Array(n).fill(4);
    const outcomes = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const rab = new ArrayBuffer(8 * n, { maxByteLength: 8 * n });
      const output = new Float64Array(rab);
      Object.defineProperty(output, 'buffer', { value: new ArrayBuffer(8) });
      const call = pool.map(input, 'sqrt', { output, grain: 1024 });
      rab.resize(0);
      outcomes.push(await outcome(call));
    }
    console.log(JSON.stringify(outcomes));
    await pool.close();`);
  assert.deepEqual(result, Array(3).fill('ERR_BLITZ_DETACHED'));
});

test("accessors on Array.prototype's indices do not reach the addon's own bookkeeping", async () => {
  const result = await hostileChild(`
    const size = 64 << 20;
    const decoy = new Uint8Array(1);
    const hijack = () => {
      for (const i of [0, 1, 2, 3]) {
        Object.defineProperty(Array.prototype, i, { configurable: true, get: () => decoy, set: () => {} });
      }
    };
    const restore = () => { for (const i of [0, 1, 2, 3]) delete Array.prototype[i]; };
    // parallelFor: the only reference to its arg is the addon's.
    let view = new Uint8Array(size);
    hijack();
    const call = pool.parallelFor(0, size, fillLate, view, { grain: size });
    restore();
    const weak = new WeakRef(view);
    view = null;
    for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 10)); }
    const value = await call;
    // crc32: the list is the caller's (own elements), the addon's copy of it is not.
    let big = Buffer.alloc(size, 7);
    const want = zlib.crc32(big);
    const list = [Buffer.from('a'), big];
    hijack();
    const crcCall = pool.crc32(list);
    restore();
    list.length = 0;
    big = null;
    globalThis.gc();
    const crcs = await crcCall;
    console.log(JSON.stringify({ resolvedToArg: value === weak.deref() && value !== decoy,
      filled: value instanceof Uint8Array && value.length === size && filled(value),
      crcs, want: [zlib.crc32(Buffer.from('a')), want] }));
    await pool.close();`);
  assert.ok(result.resolvedToArg, 'parallelFor resolved to its own arg');
  assert.ok(result.filled, "the kernel's bytes are in it");
  assert.deepEqual(result.crcs, result.want);
});
