// The built-in kernels against independent references: zlib.crc32 and a
// bitwise CRC in JavaScript, Float64Array.prototype.sort, Math.*.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import zlib from 'node:zlib';
import { blitz, uvCrc32 } from './helpers.mjs';

const pool = new blitz.Pool({ threads: 2 });
after(() => pool.close());

// CRC-32 one bit at a time, straight from the definition (reflected 0xEDB88320).
function crc32Reference(bytes) {
  let crc = 0xFFFFFFFF;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = (crc & 1) ? (crc >>> 1) ^ 0xEDB88320 : crc >>> 1;
  }
  return (crc ^ 0xFFFFFFFF) >>> 0;
}

function bytesOf(v) {
  return v instanceof ArrayBuffer ? new Uint8Array(v) : new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

test('crc32 of every kind of view equals zlib.crc32 and the bitwise definition', async () => {
  const raw = randomBytes(4096 + 64);
  const sources = [
    Buffer.alloc(0),
    Buffer.from('123456789'), // the check value of CRC-32: 0xCBF43926
    raw.subarray(3, 4),
    raw.subarray(1, 8),
    raw.subarray(5, 5 + 63),
    raw.subarray(0, 4096),
    new Uint16Array(raw.buffer, raw.byteOffset + 2, 100),
    new Float64Array(randomBytes(8 * 33).buffer),
    new DataView(raw.buffer, raw.byteOffset + 7, 1000),
    new Uint8Array(raw).buffer, // an ArrayBuffer
    new Uint8Array(new SharedArrayBuffer(300)).fill(0xA5),
  ];
  const crcs = await pool.crc32(sources);
  assert.equal(crcs.length, sources.length);
  assert.equal(crcs[1], 0xCBF43926);
  sources.forEach((source, i) => {
    const bytes = bytesOf(source);
    assert.equal(crcs[i], zlib.crc32(bytes), `zlib, source ${i}`);
    assert.equal(crcs[i], crc32Reference(bytes), `bitwise, source ${i}`);
    assert.equal(blitz.crc32Sync(source), crcs[i], `crc32Sync, source ${i}`);
  });
});

test('crc32 of 3000 buffers of random sizes, in parallel, in order', async () => {
  const buffers = Array.from({ length: 3000 }, (_, i) => randomBytes((i * 7919) % 5000));
  const crcs = await pool.crc32(buffers);
  assert.deepEqual(crcs, buffers.map((b) => zlib.crc32(b)));
  assert.deepEqual(await uvCrc32(buffers.slice(0, 200)), crcs.slice(0, 200), 'the libuv path too');
  assert.deepEqual(await pool.crc32([]), []);
});

test('crc32 of one 24 MB buffer (hashed in steps) equals zlib.crc32', async () => {
  const big = randomBytes(24 * 1024 * 1024 + 5);
  const [crc] = await pool.crc32([big]);
  assert.equal(crc, zlib.crc32(big));
});

test('the buffers list is copied: changing it after the call changes nothing', async () => {
  const list = [Buffer.from('abc'), Buffer.from('def')];
  const promise = pool.crc32(list);
  list[0] = Buffer.from('zzz');
  list.length = 1;
  assert.deepEqual(await promise, [zlib.crc32('abc'), zlib.crc32('def')]);
});

function specialValues(n, seed) {
  let x = seed;
  const next = () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const specials = [NaN, -NaN, 0, -0, Infinity, -Infinity, Number.MIN_VALUE, -Number.MIN_VALUE,
    Number.MAX_VALUE, -Number.MAX_VALUE, 1, -1, 1, 1];
  const a = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const r = next();
    a[i] = r < 0.05 ? specials[i % specials.length] : r < 0.2 ? Math.floor(next() * 50) - 25 : (next() - 0.5) * 1e6;
  }
  return a;
}

function assertSameOrder(actual, expected, what) {
  assert.equal(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    if (!Object.is(actual[i], expected[i])) {
      assert.fail(`${what}: element ${i} is ${actual[i]}, Float64Array.prototype.sort gives ${expected[i]}`);
    }
  }
}

test('sort puts Float64Arrays in the order of Float64Array.prototype.sort', async () => {
  for (const n of [0, 1, 2, 17, 1000, 100003]) {
    const a = specialValues(n, n + 1);
    const expected = a.slice().sort();
    assert.equal(await pool.sort(a), a, 'resolves to the same array');
    assertSameOrder(a, expected, `n=${n}`);
  }
});

test('sort of a subarray sorts only that view', async () => {
  const whole = Float64Array.from({ length: 70000 }, (_, i) => 70000 - i);
  const view = whole.subarray(100, 69900);
  await pool.sort(view);
  assert.equal(whole[99], 69901);
  assert.equal(whole[69900], 100);
  assertSameOrder(view, Float64Array.from({ length: 69800 }, (_, i) => 101 + i), 'the view');
});

const EXACT = {
  sqrt: Math.sqrt, abs: Math.abs, negate: (x) => -x, square: (x) => x * x,
};
const LIBM = { exp: Math.exp, log: Math.log, sin: Math.sin, cos: Math.cos };

function closeEnough(got, want) {
  if (Number.isNaN(want)) return Number.isNaN(got);
  if (!Number.isFinite(want)) return Object.is(got, want);
  return Math.abs(got - want) <= 4 * Number.EPSILON * Math.max(Math.abs(want), Number.MIN_VALUE);
}

test('map computes each operation as Math does', async () => {
  const input = Float64Array.from({ length: 50000 }, (_, i) => (i - 25000) / 97.5);
  for (const [name, f] of Object.entries(EXACT)) {
    const out = await pool.map(input, name);
    assert.ok(out instanceof Float64Array && out !== input && out.length === input.length);
    for (let i = 0; i < input.length; i++) assert.ok(Object.is(out[i], f(input[i])), `${name}(${input[i]})`);
  }
  for (const [name, f] of Object.entries(LIBM)) {
    const out = await pool.map(input, name, { grain: 512 });
    for (let i = 0; i < input.length; i++) {
      assert.ok(closeEnough(out[i], f(input[i])), `${name}(${input[i]}) = ${out[i]}, Math: ${f(input[i])}`);
    }
  }
  const affine = await pool.map(input, { mul: 3, add: -2 });
  for (let i = 0; i < input.length; i++) assert.equal(affine[i], input[i] * 3 - 2);
  assert.deepEqual(blitz.mapOperations, ['sqrt', 'abs', 'negate', 'square', 'exp', 'log', 'sin', 'cos']);
});

test('map on Float32Array rounds as Math.fround, in place or into an output', async () => {
  const input = Float32Array.from({ length: 30001 }, (_, i) => i / 7);
  const copy = input.slice();
  const out = new Float32Array(input.length);
  assert.equal(await pool.map(input, 'sqrt', { output: out }), out);
  for (let i = 0; i < input.length; i++) assert.equal(out[i], Math.fround(Math.sqrt(input[i])));
  assert.deepEqual(input, copy, 'the input is untouched');
  assert.equal(await pool.map(input, { mul: 0.5, add: 1 }, { output: input }), input);
  for (let i = 0; i < input.length; i++) assert.equal(input[i], Math.fround(copy[i] * 0.5 + 1));
});
