// The kernel families of the q8x4 layout (assembly/q8x4.ts 'narrow', q8x4wide.ts 'wide')
// and of the q4kx4 / q6kx4 layouts (q4kx4.ts / q6kx4.ts 'narrow', q4kx4wide.ts /
// q6kx4wide.ts 'wide', M = 1) and q5kx4 (per group 'narrow', four streams 'wide', M = 1),
// and the start-up
// calibration that picks one per layout (kernels/wasm/calibrate.ts). Every family must give
// the ref twin's bits for every M, N and split (so whichever a machine picks, outputs are
// the same everywhere, and a row alone equals the same row in a batch); calibration must
// pick one of them, or the one DELTASERVE_Q8X4 / Q4KX4 / Q6KX4 / Q5KX4 forces.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { Kernels, Weight } from '../src/kernels/types.js';
import { createWasmKernels, WasmKernels } from '../src/kernels/wasm/index.js';
import { dotAddIsVnni } from '../src/kernels/wasm/module.js';
import { DEFAULT_QUANT_KERNELS, type QuantKernelChoice, type QuantKernelFamily } from '../src/kernels/wasm/quant-layouts.js';
import { randomScaleMatrix } from './quant-blocks.js';
import { rng } from './numeric.js';
import { loadModel } from '../src/model/model.js';
import { parseQuantizeMode } from '../src/checkpoint/quantize-load.js';
import { TINY_THINK } from './paths.js';

const ref = createRefKernels();
const FAMILIES: readonly QuantKernelFamily[] = ['narrow', 'wide'];
const backends = [
  { label: 'threads=1', k: await createWasmKernels({ threads: 1, calibrate: false }) as WasmKernels },
  { label: 'threads=2', k: await createWasmKernels({ threads: 2, calibrate: false }) as WasmKernels },
  { label: 'vnni threads=2', k: await createWasmKernels({ threads: 2, calibrate: false, variant: 'vnni' }) as WasmKernels },
  { label: 'vnni q8x4 threads=2', k: await createWasmKernels({ threads: 2, calibrate: false, variant: 'vnni', q8Layout: 'q8x4' }) as WasmKernels },
  { label: 'plain threads=2', k: await createWasmKernels({ threads: 2, calibrate: false, variant: 'plain' }) as WasmKernels },
];
after(() => backends.forEach((b) => b.k.dispose()));

/** Per layout: the GGML type, the choice running family f, and shapes (N, K): 1 group,
 * partial last groups, odd and even group counts; the last is above the parallel threshold,
 * so the pool splits the columns into chunks. */
const LAYOUTS = [
  {
    layout: 'q8x4', type: 'q8_0' as const, set: (f: QuantKernelFamily): QuantKernelChoice => ({ ...DEFAULT_QUANT_KERNELS, q8x4M1: f, q8x4Mn: f }),
    shapes: [[1, 32], [4, 64], [5, 32], [8, 96], [9, 64], [13, 1024], [67, 256], [300, 1024]] as [number, number][],
  },
  {
    layout: 'q4kx4', type: 'q4_k' as const, set: (f: QuantKernelFamily): QuantKernelChoice => ({ ...DEFAULT_QUANT_KERNELS, q4kx4M1: f }),
    shapes: [[1, 256], [4, 512], [5, 256], [8, 768], [9, 512], [13, 1024], [67, 256], [300, 1024]] as [number, number][],
  },
  {
    layout: 'q6kx4', type: 'q6_k' as const, set: (f: QuantKernelFamily): QuantKernelChoice => ({ ...DEFAULT_QUANT_KERNELS, q6kx4M1: f }),
    shapes: [[1, 256], [4, 512], [5, 256], [8, 768], [9, 512], [13, 1024], [67, 256], [300, 1024]] as [number, number][],
  },
  {
    // 64 and 67 columns: whole groups in fours (four streams only), then leftover groups
    layout: 'q5kx4', type: 'q5_k' as const, set: (f: QuantKernelFamily): QuantKernelChoice => ({ ...DEFAULT_QUANT_KERNELS, q5kx4M1: f }),
    shapes: [[1, 256], [5, 256], [13, 1024], [64, 512], [67, 256], [300, 1024]] as [number, number][],
  },
];

function quantWeight(k: Kernels, type: 'q8_0' | 'q4_k' | 'q6_k' | 'q5_k', rows: number, cols: number, seed: number, bytes?: Uint8Array): Weight {
  const { weight, bytes: dst } = k.allocWeight(type, rows, cols);
  dst.set(bytes ?? randomScaleMatrix(type, rows, cols, seed));
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
  for (const { layout, type, set, shapes } of LAYOUTS) {
    describe(`${layout} kernel families [${label}]`, () => {
      for (const family of FAMILIES) {
        test(`${family}: == ref bit for bit; odd group counts and partial groups; a batch row == the row alone`, () => {
          k.setQuantKernels(set(family));
          const r = rng(41);
          for (const [n, kk] of shapes) {
            const w = quantWeight(k, type, n, kk, n * 7 + kk);
            const wr = quantWeight(ref, type, n, kk, n * 7 + kk);
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

  test(`q8u4 [${label}]: Q8_0 repacks into it exactly where the dot-add is AVX-VNNI (else q8x4); == ref bit for bit at the extremes`, () => {
    const w0 = quantWeight(k, 'q8_0', 4, 32, 1);
    assert.equal(w0.layout, k.q8u4 ? 'q8u4' : 'q8x4');
    assert.equal(k.q8u4, k.variant === 'vnni' && dotAddIsVnni() && !label.includes('q8x4'));
    // w + 128 ∈ {0, 1, 255} (weights −128 / −127 / 127), x quants ±127: the largest sums,
    // |Σ (w + 128)·x| = 32·255·127; M = 4, 5 and 1 (blocks of 4 rows, a leftover row, decode)
    const n = 16, kk = 256;
    for (const q of [0x80, 0x81, 0x7f]) {
      const bytes = randomScaleMatrix('q8_0', n, kk, 7);
      for (let b = 0; b < bytes.length; b += 34) bytes.fill(q, b + 2, b + 34);
      const w = quantWeight(k, 'q8_0', n, kk, 0, bytes);
      const wr = quantWeight(ref, 'q8_0', n, kk, 0, bytes);
      for (const sign of [1, -1]) {
        for (const m of [4, 5, 1]) {
          const x = k.alloc(m * kk).fill(sign * 0.75); // every block's quants ±127
          const out = k.alloc(m * n);
          const want = new Float32Array(m * n);
          k.matmul(out, x, w, m);
          ref.matmul(want, x, wr, m);
          same(out, want, `quants 0x${q.toString(16)}, x = ${sign * 0.75}, M=${m}`);
        }
      }
    }
  });

  test(`q4kx4 wide [${label}]: the largest sub-block sums (every nibble 15, every quant ±127) == ref`, () => {
    // the wide kernel sums 16 products of ≤ 15·127 per i16 lane: 30480 at most, exact
    k.setQuantKernels({ ...DEFAULT_QUANT_KERNELS, q4kx4M1: 'wide' });
    const n = 16, kk = 512;
    const bytes = randomScaleMatrix('q4_k', n, kk, 5);
    for (let b = 0; b < bytes.length; b += 144) bytes.fill(0xff, b + 16, b + 144); // every nibble 15
    const w = quantWeight(k, 'q4_k', n, kk, 0, bytes);
    const wr = quantWeight(ref, 'q4_k', n, kk, 0, bytes);
    for (const sign of [1, -1]) {
      const x = k.alloc(kk).fill(sign * 0.75); // every block's quants ±127
      const out = k.alloc(n);
      const want = new Float32Array(n);
      k.matmul(out, x, w, 1);
      ref.matmul(want, x, wr, 1);
      same(out, want, `all-15 nibbles, x = ${sign * 0.75}`);
    }
  });

  test(`q6kx4 wide [${label}]: the largest sums (every u 63 or 0, scales ±128/127, quants ±127) == ref`, () => {
    // pairs of quads in i16: ≤ 2·2·63·127 = 32004, exact; the scaled sums in i32
    k.setQuantKernels({ ...DEFAULT_QUANT_KERNELS, q6kx4M1: 'wide' });
    const n = 16, kk = 512;
    for (const [fill, scale] of [[0xff, 0x80], [0xff, 0x7f], [0x00, 0x81]] as const) {
      const bytes = randomScaleMatrix('q6_k', n, kk, 6);
      for (let b = 0; b < bytes.length; b += 210) {
        bytes.fill(fill, b, b + 192); // ql, qh: every u = 63 (0xff) or 0 (0x00)
        bytes.fill(scale, b + 192, b + 208);
      }
      const w = quantWeight(k, 'q6_k', n, kk, 0, bytes);
      const wr = quantWeight(ref, 'q6_k', n, kk, 0, bytes);
      for (const sign of [1, -1]) {
        const x = k.alloc(kk).fill(sign * 0.75);
        const out = k.alloc(n);
        const want = new Float32Array(n);
        k.matmul(out, x, w, 1);
        ref.matmul(want, x, wr, 1);
        same(out, want, `u bytes ${fill}, scales ${scale}, x = ${sign * 0.75}`);
      }
    }
  });
}

/** Allocate and pack a small weight of `type` (what a model load does for each weight). */
function packOne(k: WasmKernels, type: 'q8_0' | 'q4_k' | 'q6_k' | 'q5_k'): void {
  k.packWeight(k.allocWeight(type, 8, 256).weight);
}

const ENVS = ['DELTASERVE_Q8X4', 'DELTASERVE_Q4KX4', 'DELTASERVE_Q6KX4', 'DELTASERVE_Q5KX4'] as const;

/** Run f with the calibration variables set as given (undefined: unset), then restore them. */
async function withEnv(values: Partial<Record<(typeof ENVS)[number], string>>, f: () => Promise<void>): Promise<void> {
  const prev = ENVS.map((e) => process.env[e]);
  for (const e of ENVS) {
    if (values[e] === undefined) delete process.env[e];
    else process.env[e] = values[e];
  }
  try {
    await f();
  } finally {
    ENVS.forEach((e, i) => (prev[i] === undefined ? delete process.env[e] : (process.env[e] = prev[i])));
  }
}

describe('quant kernel calibration', () => {
  test('weightsLoaded times the families of every layout packed and keeps the faster of each; every timing is a positive number', async () => {
    await withEnv({}, async () => {
      const k = await createWasmKernels({ threads: 1, q8Layout: 'q8x4' }) as WasmKernels; // q8u4 has one kernel
      try {
        // nothing timed before a model's weights are loaded
        assert.deepEqual([k.calibration?.q8x4M1Ms, k.calibration?.q4kx4M1Ms, k.calibration?.q6kx4M1Ms, k.calibration?.q5kx4M1Ms], [{}, {}, {}, {}]);
        packOne(k, 'q4_k');
        k.weightsLoaded();
        assert.ok((k.calibration?.q4kx4M1Ms.wide ?? 0) > 0, 'the packed format is timed');
        assert.deepEqual([k.calibration?.q8x4M1Ms, k.calibration?.q6kx4M1Ms, k.calibration?.q5kx4M1Ms], [{}, {}, {}], 'only that one');
        const q4 = k.calibration?.q4kx4M1Ms;
        for (const t of ['q8_0', 'q6_k', 'q5_k'] as const) packOne(k, t);
        k.weightsLoaded();
        assert.equal(k.calibration?.q4kx4M1Ms, q4, 'a format is timed once');
        const c = k.calibration;
        assert.ok(c, 'calibration result recorded');
        assert.equal(c.forced, false);
        assert.deepEqual(k.quantKernelChoice, c.choice);
        assert.equal(c.choice.q8x4Mn, c.choice.q8x4M1, 'the q8x4 M = 1 winner serves M = 2, 3');
        for (const [picked, ms] of [[c.choice.q8x4M1, c.q8x4M1Ms], [c.choice.q4kx4M1, c.q4kx4M1Ms], [c.choice.q6kx4M1, c.q6kx4M1Ms], [c.choice.q5kx4M1, c.q5kx4M1Ms]] as const) {
          assert.ok(FAMILIES.includes(picked), `chose ${picked}`);
          for (const f of FAMILIES) assert.ok((ms[f] ?? 0) > 0, `${f} timed`);
          // the chosen family is the faster (fastest round of each)
          const other = picked === 'wide' ? 'narrow' : 'wide';
          assert.ok(ms[picked]! <= ms[other]!);
        }
        // the probes' memory was given back: as much used as by an uncalibrated backend
        const plain = await createWasmKernels({ threads: 1, calibrate: false }) as WasmKernels;
        for (const t of ['q4_k', 'q8_0', 'q6_k', 'q5_k'] as const) packOne(plain, t);
        plain.weightsLoaded();
        assert.deepEqual(plain.calibration, null, 'calibrate: false times nothing');
        assert.equal(k.mem.arenas[0]!.usedBytes, plain.mem.arenas[0]!.usedBytes);
        plain.dispose();
        // ... zeroed: alloc() still hands out zeroed memory where the probes were
        const fresh = k.alloc(4 << 20);
        assert.equal(fresh.findIndex((v) => v !== 0), -1, 'memory after the probe is zero');
      } finally {
        k.dispose();
      }
    });
  });

  test('DELTASERVE_Q8X4 / Q4KX4 / Q6KX4 / Q5KX4 force a family without timing; a bad value is an error naming the variable', async () => {
    for (const f of FAMILIES) {
      const g = f === 'wide' ? 'narrow' : 'wide';
      await withEnv({ DELTASERVE_Q8X4: f, DELTASERVE_Q4KX4: g, DELTASERVE_Q6KX4: f, DELTASERVE_Q5KX4: g }, async () => {
        const k = await createWasmKernels({ threads: 1 }) as WasmKernels;
        assert.deepEqual(k.calibration, { choice: { q8x4M1: f, q8x4Mn: f, q4kx4M1: g, q6kx4M1: f, q5kx4M1: g }, q8x4M1Ms: {}, q4kx4M1Ms: {}, q6kx4M1Ms: {}, q5kx4M1Ms: {}, forced: true });
        k.dispose();
      });
    }
    // one forced, the other timed
    await withEnv({ DELTASERVE_Q4KX4: 'narrow' }, async () => {
      const k = await createWasmKernels({ threads: 1 }) as WasmKernels;
      for (const t of ['q4_k', 'q8_0'] as const) packOne(k, t);
      k.weightsLoaded();
      assert.equal(k.calibration?.forced, false);
      assert.equal(k.calibration?.choice.q4kx4M1, 'narrow');
      assert.deepEqual(k.calibration?.q4kx4M1Ms, {});
      if (k.q8u4) assert.deepEqual(k.calibration?.q8x4M1Ms, {}); // one kernel: not timed
      else assert.ok((k.calibration?.q8x4M1Ms.wide ?? 0) > 0);
      k.dispose();
    });
    await withEnv({ DELTASERVE_Q8X4: 'fast' }, async () => {
      await assert.rejects(createWasmKernels({ threads: 1 }), /DELTASERVE_Q8X4 must be narrow or wide \(got "fast"\)/);
    });
    await withEnv({ DELTASERVE_Q4KX4: 'x' }, async () => {
      await assert.rejects(createWasmKernels({ threads: 1 }), /DELTASERVE_Q4KX4 must be narrow or wide \(got "x"\)/);
    });
    await withEnv({ DELTASERVE_Q6KX4: 'Wide' }, async () => {
      await assert.rejects(createWasmKernels({ threads: 1 }), /DELTASERVE_Q6KX4 must be narrow or wide \(got "Wide"\)/);
    });
    await withEnv({ DELTASERVE_Q5KX4: 'quad' }, async () => {
      await assert.rejects(createWasmKernels({ threads: 1 }), /DELTASERVE_Q5KX4 must be narrow or wide \(got "quad"\)/);
    });
  });
});

test('a BF16 model times no quantized format at load; the same model quantized to Q8_0 at load times that one', async () => {
  await withEnv({}, async () => {
    const k = await createWasmKernels({ threads: 1, q8Layout: 'q8x4' }) as WasmKernels;
    try {
      loadModel(TINY_THINK(), k);
      const c = k.calibration!;
      assert.deepEqual([c.q8x4M1Ms, c.q4kx4M1Ms, c.q6kx4M1Ms, c.q5kx4M1Ms], [{}, {}, {}, {}]);
      loadModel(TINY_THINK(), k, { quantize: parseQuantizeMode('q8_0') });
      assert.ok((k.calibration!.q8x4M1Ms.wide ?? 0) > 0, 'Q8_0 weights: its families timed');
      assert.deepEqual(k.calibration!.q4kx4M1Ms, {});
    } finally {
      k.dispose();
    }
  });
});
