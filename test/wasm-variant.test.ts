// Which wasm kernel build runs (kernels/wasm/module.ts chooseVariant): vnni where V8 lowers
// the relaxed i8×i7 dot-add to AVX-VNNI (read from the probe's result), else fma where the
// runtime takes relaxed SIMD, else plain; DELTASERVE_WASM_FMA forces one. The builds' bits
// are compared in the conformance suites (test/wasm-backends.ts runs the vnni build too).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chooseVariant, dotAddIsVnni, dotAddProbe } from '../src/kernels/wasm/module.js';

function withEnv<T>(value: string | undefined, f: () => T): T {
  const old = process.env['DELTASERVE_WASM_FMA'];
  if (value === undefined) delete process.env['DELTASERVE_WASM_FMA'];
  else process.env['DELTASERVE_WASM_FMA'] = value;
  try {
    return f();
  } finally {
    if (old === undefined) delete process.env['DELTASERVE_WASM_FMA'];
    else process.env['DELTASERVE_WASM_FMA'] = old;
  }
}

test('auto picks vnni exactly when the dot-add probe shows the AVX-VNNI lowering, else fma', () => {
  const auto = withEnv(undefined, () => chooseVariant('auto').variant); // enables relaxed SIMD on Node 20
  const probe = dotAddProbe(127, 255);
  // vpdpbusd (exact u8 × s8), vpmaddubsw + vpmaddwd (saturated pair sums), a signed dot
  assert.ok(probe === 129540 || probe === 65534 || probe === -508, `unknown lowering: ${probe}`);
  assert.equal(auto, dotAddIsVnni() ? 'vnni' : 'fma');
  if (process.versions.v8.startsWith('11.')) assert.equal(auto, 'fma', 'V8 11 has no VNNI lowering of the relaxed dot-add');
});

test('DELTASERVE_WASM_FMA forces a build: 0 plain, 1 fma, vnni vnni; an explicit request wins', () => {
  assert.equal(withEnv('0', () => chooseVariant('auto').variant), 'plain');
  assert.equal(withEnv('1', () => chooseVariant('auto').variant), 'fma');
  assert.equal(withEnv('vnni', () => chooseVariant('auto').variant), 'vnni');
  assert.equal(withEnv('0', () => chooseVariant('vnni').variant), 'vnni');
  assert.equal(withEnv('vnni', () => chooseVariant('fma').variant), 'fma');
});
