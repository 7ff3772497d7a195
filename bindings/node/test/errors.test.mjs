// Bad input throws TypeError/RangeError synchronously and starts nothing;
// a failed C task rejects with the blz_status name as code; a closed pool
// rejects with BLZ_ESHUTDOWN.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { blitz, kernel, kernelLibrary } from './helpers.mjs';

const pool = new blitz.Pool({ threads: 2 });
after(() => pool.close());

function throwsType(fn, what) {
  assert.throws(fn, (e) => e instanceof TypeError && e.message.length > 10, what);
}

function throwsRange(fn, what) {
  assert.throws(fn, (e) => e instanceof RangeError && typeof e.code === 'string', what);
}

test('Pool options are checked', () => {
  for (const threads of [-1, 1.5, 65536, NaN, Infinity]) throwsRange(() => new blitz.Pool({ threads }), `threads ${threads}`);
  for (const threads of ['2', null, {}]) throwsType(() => new blitz.Pool({ threads }), `threads ${threads}`);
  throwsType(() => new blitz.Pool(null), 'null options');
  throwsType(() => new blitz.Pool(3), 'a number as options');
});

test('run: bad arguments throw before any work starts', async () => {
  const counter = new Uint32Array(1);
  const count = kernel('blzt_count');
  for (const fn of [undefined, null, () => {}, {}, 'blzt_count', kernel('blzt_mark', 'range')]) {
    throwsType(() => pool.run(fn, counter), `fn ${String(fn)}`);
  }
  for (const arg of [1, 'x', {}, [1, 2], true, Symbol('s')]) throwsType(() => pool.run(count, arg), `arg ${String(arg)}`);
  throwsType(() => pool.run(count, new SharedArrayBuffer(8)), 'a bare SharedArrayBuffer (a view of one is fine)');
  throwsType(() => pool.run(count, counter, { signal: {} }), 'a signal that is no AbortSignal');
  throwsType(() => pool.run(count, counter, 'options'), 'options that are no object');
  await pool.run(blitz.kernels.noop); // anything started above would have run by now
  assert.equal(counter[0], 0, 'nothing ran');
});

test('parallelFor: ranges and grain are checked', () => {
  const body = kernel('blzt_mark', 'range');
  const counts = new Uint32Array(10);
  throwsRange(() => pool.parallelFor(5, 4, body, counts), 'begin > end');
  for (const bad of [-1, 1.5, NaN, Infinity, 2 ** 53]) {
    throwsRange(() => pool.parallelFor(bad, 10, body, counts), `begin ${bad}`);
    throwsRange(() => pool.parallelFor(0, bad, body, counts), `end ${bad}`);
    throwsRange(() => pool.parallelFor(0, 10, body, counts, { grain: bad }), `grain ${bad}`);
  }
  for (const bad of ['0', null, 1n]) throwsType(() => pool.parallelFor(bad, 10, body, counts), `begin ${String(bad)}`);
  throwsType(() => pool.parallelFor(0, 10, kernel('blzt_count'), counts), "a 'task' function");
  assert.ok(counts.every((c) => c === 0));
});

test('crc32, sort and map check their inputs', () => {
  throwsType(() => pool.crc32(Buffer.from('x')), 'a buffer instead of an array');
  throwsType(() => pool.crc32('abc'), 'a string');
  assert.throws(() => pool.crc32([Buffer.alloc(1), 'two']), /buffers\[1\]/, 'names the bad element');
  throwsType(() => pool.sort([3, 2, 1]), 'an Array');
  throwsType(() => pool.sort(new Float32Array(3)), 'a Float32Array');
  throwsType(() => pool.map(new Int32Array(3), 'sqrt'), 'an Int32Array');
  throwsRange(() => pool.map(new Float64Array(3), 'cbrt'), 'an unknown operation');
  throwsType(() => pool.map(new Float64Array(3), 42), 'an op that is a number');
  throwsType(() => pool.map(new Float64Array(3), { mul: '2' }), 'mul as a string');
  throwsType(() => pool.map(new Float64Array(3), 'sqrt', { output: new Float32Array(3) }), 'output of another type');
  throwsRange(() => pool.map(new Float64Array(3), 'sqrt', { output: new Float64Array(2) }), 'output too short');
});

test('nativeFunction: a missing library or symbol is a clear Error', () => {
  assert.throws(() => blitz.nativeFunction('/nonexistent/libnothing.so', 'f'),
    (e) => e.code === 'ERR_DLOPEN_FAILED' && e.message.includes('/nonexistent/libnothing.so'));
  assert.throws(() => blitz.nativeFunction(kernelLibrary, 'blzt_no_such_function'),
    (e) => e.code === 'ERR_BLITZ_SYMBOL' && e.message.includes('blzt_no_such_function'));
  throwsType(() => blitz.nativeFunction(kernelLibrary, 'blzt_noop', 'thread'), 'an unknown kind');
  throwsType(() => blitz.nativeFunction(42, 'blzt_noop'), 'a number as the library');
  throwsType(() => blitz.nativeFunction(kernelLibrary, ''), 'an empty symbol');
  assert.throws(() => blitz.nativeFunction(kernelLibrary, 'blzt\0noop'), (e) => e instanceof TypeError, 'a NUL');
  throwsType(() => new blitz.NativeFunction({}, 'task'), 'constructing one by hand');
  const f = kernel('blzt_noop');
  assert.deepEqual([f.kind, f.symbol, f.library], ['task', 'blzt_noop', kernelLibrary]);
  assert.ok(Object.isFrozen(f));
});

test('a C task that calls blz_fail rejects with code BLZ_ETASK; the pool goes on', async () => {
  const calls = new Uint32Array(1);
  const failedBefore = pool.stats().tasksFailed;
  await assert.rejects(pool.run(kernel('blzt_fail'), calls), (e) => {
    assert.ok(e instanceof Error);
    assert.equal(e.code, 'BLZ_ETASK');
    assert.equal(e.status, -6);
    assert.match(e.message, /BLZ_ETASK/);
    return true;
  });
  assert.equal(calls[0], 1, 'the kernel ran once');
  assert.equal(pool.stats().tasksFailed, failedBefore + 1);
  assert.equal(await pool.run(blitz.kernels.noop, calls), calls, 'the pool still works');
});

test('a failing parallelFor piece rejects with BLZ_ETASK', async () => {
  const state = new Uint32Array([5000, 0]); // fail the piece holding index 5000
  await assert.rejects(pool.parallelFor(0, 100000, kernel('blzt_fail_at', 'range'), state, { grain: 100 }),
    { code: 'BLZ_ETASK' });
  assert.ok(state[1] >= 1, 'pieces ran');
});

test('the first failing parallelFor piece stops the rest of the loop (fail-fast)', async () => {
  // One worker: the pieces run in order, so the failing one (index 5000 of
  // 100 per piece: piece 50) comes before the other 949 would start.
  const single = new blitz.Pool({ threads: 1 });
  try {
    const state = new Uint32Array([5000, 0]);
    await assert.rejects(single.parallelFor(0, 100000, kernel('blzt_fail_at', 'range'), state, { grain: 100 }),
      { code: 'BLZ_ETASK' });
    assert.equal(state[1], 51, 'pieces 0..50 ran, none after the failure');
  } finally {
    await single.close();
  }
});

test('a closed pool rejects with BLZ_ESHUTDOWN, and stats throws it', async () => {
  const p = new blitz.Pool({ threads: 1 });
  const closing = p.close();
  assert.equal(p.close(), closing, 'close returns the same promise');
  assert.equal(p.closed, true);
  await closing;
  const counter = new Uint32Array(1);
  const calls = [
    p.run(kernel('blzt_count'), counter),
    p.parallelFor(0, 1, kernel('blzt_mark', 'range'), new Uint32Array(1)),
    p.crc32([Buffer.from('x')]),
    p.sort(new Float64Array(2)),
    p.map(new Float64Array(2), 'abs'),
  ];
  for (const call of calls) {
    await assert.rejects(call, (e) => e instanceof Error && e.code === 'BLZ_ESHUTDOWN' && e.status === -4);
  }
  // With a signal that is already aborted, the closed pool still answers first.
  const signal = AbortSignal.abort('too late');
  const aborted = [
    p.run(kernel('blzt_count'), counter, { signal }),
    p.parallelFor(0, 1, kernel('blzt_mark', 'range'), new Uint32Array(1), { signal }),
    p.crc32([Buffer.from('x')], { signal }),
    p.sort(new Float64Array(2), { signal }),
    p.map(new Float64Array(2), 'abs', { signal }),
  ];
  for (const call of aborted) {
    await assert.rejects(call, (e) => e instanceof Error && e.code === 'BLZ_ESHUTDOWN' && e.status === -4);
  }
  assert.equal(counter[0], 0);
  assert.throws(() => p.stats(), { code: 'BLZ_ESHUTDOWN' });
  throwsType(() => p.run(() => {}), 'bad arguments still throw on a closed pool');
  await p.close();
});
