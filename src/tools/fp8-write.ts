// Writing block-wise FP8 checkpoints (make-model --dtype fp8, and FP8 copies of a BF16
// checkpoint): `fp8Sources` turns a BF16 tensor source into the F8 weight and its scales
// (scale = block amax / 448, values rounded to nearest-even e4m3). The format and the
// reading side are in checkpoint/fp8.ts.
import { assert } from '../util/errors.js';
import { bf16ToF32, type Checkpoint } from '../checkpoint/safetensors.js';
import { dims3, encodeE4M3, FP8_MAX, SCALE_SUFFIX } from '../checkpoint/fp8.js';
import type { TensorSource } from './safetensors-writer.js';

/** The F8_E4M3 weight and its F32 `_scale_inv` for a BF16 source with ≥ 2 dims, quantized
 * band by band (`block[0]` rows at a time); one tensor's FP8 bytes at a time are held. Each of the
 * two sources pulls its own pass over `bf16()` (a fresh BF16 source per call). */
export function fp8Sources(bf16: () => TensorSource, block: readonly [number, number] = [128, 128]): [TensorSource, TensorSource] {
  const proto = bf16();
  assert(proto.dtype === 'BF16' && proto.shape.length >= 2, `fp8Sources: ${proto.name} must be a BF16 matrix`);
  const [l, r, c] = dims3(proto.shape);
  const [br, bc] = block;
  const sr = Math.ceil(r / br);
  const sc = Math.ceil(c / bc);
  /** Calls onBand(codes, scales) for each band of ≤ br rows, in order. */
  const bands = (onBand: (codes: Uint8Array, scales: Float32Array) => void): void => {
    const src = bf16();
    let off = 0;
    for (let li = 0; li < l; li++) {
      for (let r0 = 0; r0 < r; r0 += br) {
        const rows = Math.min(br, r - r0);
        const bits = new Uint16Array(rows * c);
        src.fill(new Uint8Array(bits.buffer), off);
        off += bits.byteLength;
        const scales = new Float32Array(sc);
        for (let j = 0; j < sc; j++) {
          let amax = 0;
          for (let y = 0; y < rows; y++) {
            for (let x = j * bc; x < Math.min(c, (j + 1) * bc); x++) amax = Math.max(amax, Math.abs(bf16ToF32(bits[y * c + x]!)));
          }
          scales[j] = amax > 0 ? amax / FP8_MAX : 1;
        }
        const codes = new Uint8Array(rows * c);
        for (let y = 0; y < rows; y++) {
          for (let x = 0; x < c; x++) codes[y * c + x] = encodeE4M3(bf16ToF32(bits[y * c + x]!) / scales[Math.floor(x / bc)]!);
        }
        onBand(codes, scales);
      }
    }
  };
  return [streamed(proto.name, 'F8_E4M3', proto.shape, (emit) => bands((codes) => emit(codes))),
    streamed(`${proto.name}${SCALE_SUFFIX}`, 'F32', [...proto.shape.slice(0, -2), sr, sc],
      (emit) => bands((_, scales) => emit(new Uint8Array(scales.buffer)))),
  ];
}

/** A TensorSource whose bytes come from a producer run once per pass (restarted when the
 * writer asks for offset 0); pieces are served from a queue of produced chunks. */
function streamed(name: string, dtype: TensorSource['dtype'], shape: readonly number[], produce: (emit: (b: Uint8Array) => void) => void): TensorSource {
  let chunks: Uint8Array[] = [];
  let pos = 0;
  return {
    name, dtype, shape,
    fill(dest: Uint8Array, byteOffset: number): void {
      if (byteOffset === 0) {
        chunks = [];
        produce((b) => chunks.push(b.slice()));
        pos = 0;
      }
      assert(byteOffset === pos, `${name}: pieces must be consecutive`);
      let done = 0;
      while (done < dest.byteLength) {
        const head = chunks[0];
        assert(head !== undefined, `${name}: producer ended early`);
        const n = Math.min(head.byteLength, dest.byteLength - done);
        dest.set(head.subarray(0, n), done);
        done += n;
        if (n === head.byteLength) chunks.shift();
        else chunks[0] = head.subarray(n);
      }
      pos += done;
    },
  };
}

// ---------------------------------------------------------------------------------------
// Converting an existing BF16 checkpoint

/** A BF16 TensorSource reading `name` from `ck` piece by piece. */
function checkpointSource(ck: Checkpoint, name: string): TensorSource {
  const t = ck.info(name);
  assert(t.dtype === 'BF16', `checkpointSource: ${name} is ${t.dtype}, not BF16`);
  return { name, dtype: 'BF16', shape: t.shape, fill: (dest, off) => ck.readRangeInto(name, off, dest) };
}

/** Sources of a block-wise FP8 copy of a BF16 checkpoint: every 2-D `*_proj.weight` of
 * the text model becomes F8_E4M3 + `_scale_inv`; the rest is copied as is. */
export function fp8CopySources(ck: Checkpoint, block: readonly [number, number] = [128, 128]): TensorSource[] {
  const out: TensorSource[] = [];
  for (const t of ck.tensors.values()) {
    const quantize = t.dtype === 'BF16' && t.shape.length === 2 && t.name.endsWith('_proj.weight') && !t.name.startsWith('model.visual.');
    if (quantize) out.push(...fp8Sources(() => checkpointSource(ck, t.name), block));
    else out.push({ name: t.name, dtype: t.dtype as TensorSource['dtype'], shape: t.shape, fill: (dest, off) => ck.readRangeInto(t.name, off, dest) });
  }
  return out;
}
