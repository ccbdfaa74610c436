// make-model's tensor values: each tensor drawn from its own Rng seeded by (seed, name), with
// integer arithmetic and V8's portable Math functions only, so equal options give
// byte-identical files whatever the write order or sharding; produced piece by piece.
import { Rng } from '../util/rng.js';
import { assert } from '../util/errors.js';
import type { TensorSource, WriteDType } from './safetensors-writer.js';

/** How a tensor's values are drawn ('normal' is the Irwin–Hall approximation in generate()). */
export type Init =
  | { readonly kind: 'normal'; readonly mean: number; readonly std: number }
  | { readonly kind: 'alog' } // log(uniform(1, 16))
  | { readonly kind: 'dtbias' }; // softplus⁻¹(dt), dt log-uniform in [1e-3, 1e-1]


export interface TensorDef { readonly name: string; readonly shape: number[]; readonly init: Init }

/** Irwin–Hall sum of the 4 bytes of one u32: mean 510, sd = sqrt(4·(256²−1)/12). Integer
 * only (portable, fast); approximately normal, bounded at ±3.46 sd. */
const IH_MEAN = 510;
const IH_SD = Math.sqrt((4 * (256 * 256 - 1)) / 12);
const LOG_DT_MIN = Math.log(1e-3);
const LOG_DT_MAX = Math.log(1e-1);

function generate(rng: Rng, init: Init, out: Float32Array): void {
  const n = out.length;
  if (init.kind === 'normal') {
    const scale = init.std / IH_SD;
    const mean = init.mean;
    for (let i = 0; i < n; i++) {
      const x = rng.nextU32();
      const s = (x & 255) + ((x >>> 8) & 255) + ((x >>> 16) & 255) + (x >>> 24);
      out[i] = mean + (s - IH_MEAN) * scale;
    }
  } else if (init.kind === 'alog') {
    for (let i = 0; i < n; i++) out[i] = Math.log(1 + 15 * rng.next());
  } else {
    for (let i = 0; i < n; i++) {
      const dt = Math.exp(LOG_DT_MIN + rng.next() * (LOG_DT_MAX - LOG_DT_MIN));
      out[i] = dt + Math.log(-Math.expm1(-dt)); // softplus(out) = dt
    }
  }
}

const BLOCK = 1 << 16;
const blockF32 = new Float32Array(BLOCK);
const blockU32 = new Uint32Array(blockF32.buffer);

/** FNV-1a 64 of the UTF-8 name. */
function fnv1a64(s: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(s, 'utf8')) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h;
}

export function tensorSource(def: TensorDef, dtype: WriteDType, seed: number): TensorSource {
  const rngSeed = BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n) ^ fnv1a64(def.name);
  let rng = new Rng(rngSeed);
  let produced = 0;
  return {
    name: def.name, dtype, shape: def.shape,
    fill(dest: Uint8Array, byteOffset: number): void {
      if (byteOffset === 0) {
        rng = new Rng(rngSeed); // a fresh pass (e.g. the plan written twice) repeats the values
        produced = 0;
      }
      assert(byteOffset === produced, `tensor ${def.name}: pieces must be consecutive (${byteOffset} vs ${produced})`);
      produced += dest.byteLength;
      if (dtype === 'F32') {
        generate(rng, def.init, new Float32Array(dest.buffer, dest.byteOffset, dest.byteLength / 4));
        return;
      }
      assert(dtype === 'BF16', `make-model writes BF16 or F32, not ${dtype}`);
      const out = new Uint16Array(dest.buffer, dest.byteOffset, dest.byteLength / 2);
      for (let i0 = 0; i0 < out.length; i0 += BLOCK) {
        const n = Math.min(BLOCK, out.length - i0);
        generate(rng, def.init, blockF32.subarray(0, n));
        for (let i = 0; i < n; i++) {
          const u = blockU32[i]!;
          out[i0 + i] = (u + 0x7fff + ((u >>> 16) & 1)) >>> 16; // round to nearest even (finite values)
        }
      }
    },
  };
}
