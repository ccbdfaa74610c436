// The q8x4 kernel families (assembly/q8x4.ts 'narrow', q8x4wide.ts 'wide') and the
// start-up calibration that picks one (kernels/wasm/calibrate.ts). Every family must give
// the ref twin's bits for every M, N and split (so whichever a machine picks, outputs are
// the same everywhere, and a row alone equals the same row in a batch); calibration must
// pick one of them, or the one DELTASERVE_Q8X4 forces.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { Kernels, Weight } from '../src/kernels/types.js';
import { createWasmKernels, WasmKernels } from '../src/kernels/wasm/index.js';
import type { Q8x4Kernel } from '../src/kernels/wasm/quant-layouts.js';
import { randomScaleMatrix } from './quant-blocks.js';
import { rng } from './numeric.js';

const ref = createRefKernels();
const FAMILIES: readonly Q8x4Kernel[] = ['narrow', 'wide'];
const backends = [
  { label: 'threads=1', k: await createWasmKernels({ threads: 1, calibrate: false }) as WasmKernels },
  { label: 'threads=2', k: await createWasmKernels({ threads: 2, calibrate: false }) as WasmKernels },
];
after(() => backends.forEach((b) => b.k.dispose()));

function q8Weight(k: Kernels, rows: number, cols: number, seed: number): Weight {
  const { weight, bytes } = k.allocWeight('q8_0', rows, cols);
  bytes.set(randomScaleMatrix('q8_0', rows, cols, seed));
  return k.packWeight(weight);
}

function fill(k: Kernels, n: number, r: () => number): Float32Array {
  const a = k.alloc(n);
  for (let i = 0; i < n; i++) a[i] = (2 * r() - 1) * (i % 7 === 0 ? 4 : 1);
  return a;
}

function same(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]} (not bit-identical)`);
  }
}

for (const { label, k } of backends) {
  describe(`q8x4 kernel families [${label}]`, () => {
    for (const family of FAMILIES) {
      test(`${family}: == ref bit for bit; odd group counts and partial groups; a batch row == the row alone`, () => {
        k.setQuantKernels({ q8x4M1: family, q8x4Mn: family });
        const r = rng(41);
        // N: 1 group, partial last groups, odd and even group counts; the last shape is
        // above the parallel threshold, so the pool splits the columns into chunks
        const shapes: [number, number][] = [[1, 32], [4, 64], [5, 32], [8, 96], [9, 64], [13, 1024], [67, 256], [300, 1024]];
        for (const [n, kk] of shapes) {
          const w = q8Weight(k, n, kk, n * 7 + kk);
          const wr = q8Weight(ref, n, kk, n * 7 + kk);
          for (const m of [1, 2, 3, 4, 5, 7, 9]) {
            const x = fill(k, m * kk, r);
            const out = k.alloc(m * n);
            const want = new Float32Array(m * n);
            k.matmul(out, x, w, m);
            ref.matmul(want, x, wr, m);
            same(out, want, `${family} M=${m} N=${n} K=${kk}`);
            const one = k.alloc(n);
            k.matmul(one, x.subarray((m - 1) * kk), w, 1);
            same(one, out.subarray((m - 1) * n), `${family} row ${m - 1} alone vs in M=${m} (N=${n} K=${kk})`);
          }
        }
      });
    }
  });
}

describe('q8x4 kernel calibration', () => {
  test('createWasmKernels times the families and keeps one; every timing is a positive number', async () => {
    const prev = process.env['DELTASERVE_Q8X4'];
    delete process.env['DELTASERVE_Q8X4'];
    const k = await createWasmKernels({ threads: 1 }) as WasmKernels;
    try {
      const c = k.calibration;
      assert.ok(c, 'calibration result recorded');
      assert.equal(c.forced, false);
      assert.ok(FAMILIES.includes(c.choice.q8x4M1), `chose ${c.choice.q8x4M1}`);
      assert.deepEqual(k.quantKernelChoice, c.choice);
      for (const f of FAMILIES) assert.ok((c.q8x4M1Ms[f] ?? 0) > 0, `${f} timed`);
      // the chosen family is the faster median
      const other = c.choice.q8x4M1 === 'wide' ? 'narrow' : 'wide';
      assert.ok(c.q8x4M1Ms[c.choice.q8x4M1]! <= c.q8x4M1Ms[other]!);
      // the probe's memory was given back: as much used as by an uncalibrated backend
      const plain = await createWasmKernels({ threads: 1, calibrate: false }) as WasmKernels;
      assert.equal(k.mem.arenas[0]!.usedBytes, plain.mem.arenas[0]!.usedBytes);
      plain.dispose();
      // ... zeroed: alloc() still hands out zeroed memory where the probe was
      const fresh = k.alloc(4 << 20);
      assert.equal(fresh.findIndex((v) => v !== 0), -1, 'memory after the probe is zero');
    } finally {
      k.dispose();
      if (prev !== undefined) process.env['DELTASERVE_Q8X4'] = prev;
    }
  });

  test('DELTASERVE_Q8X4 forces a family without timing; a bad value is an error naming the variable', async () => {
    const prev = process.env['DELTASERVE_Q8X4'];
    try {
      for (const f of FAMILIES) {
        process.env['DELTASERVE_Q8X4'] = f;
        const k = await createWasmKernels({ threads: 1 }) as WasmKernels;
        assert.deepEqual(k.calibration, { choice: { q8x4M1: f, q8x4Mn: f }, q8x4M1Ms: {}, forced: true });
        k.dispose();
      }
      process.env['DELTASERVE_Q8X4'] = 'fast';
      await assert.rejects(createWasmKernels({ threads: 1 }), /DELTASERVE_Q8X4 must be narrow or wide \(got "fast"\)/);
    } finally {
      if (prev === undefined) delete process.env['DELTASERVE_Q8X4'];
      else process.env['DELTASERVE_Q8X4'] = prev;
    }
  });
});
