// Before loading: do the weights fit in memory? Their resident size is estimated from the
// checkpoint's tensor table (as stored, or as --quantize will store the matmul weights)
// and compared with the memory available now, so that a model too big for the machine is
// a clear error naming the way out instead of an out-of-memory kill halfway through.
import { quantRowBytes, type QuantType } from '../kernels/quant/formats.js';
import { DeltaserveError } from '../util/errors.js';
import { QUANTIZE_MODES, type QuantizeMode, quantTypeFor } from '../checkpoint/quantize-load.js';
import { VISION_PREFIX } from './config.js';
import type { TensorInfo } from '../checkpoint/safetensors.js';

/** Bytes of a quantized [rows, cols] weight in a backend (Kernels.quantWeightBytes). */
export type QuantBytes = (type: QuantType, rows: number, cols: number) => number;

const ggmlBytes: QuantBytes = (type, rows, cols) => rows * quantRowBytes(type, cols);

/** Bytes the text model's weights take once loaded (the vision tower is never loaded);
 * quantized weights sized by `quantBytes` (default: their GGML blocks). */
export function residentWeightBytes(tensors: Iterable<TensorInfo>, quantize?: QuantizeMode, quantBytes: QuantBytes = ggmlBytes): number {
  let n = 0;
  for (const t of tensors) {
    if (t.name.startsWith(VISION_PREFIX)) continue;
    const cols = t.shape[t.shape.length - 1] ?? 0;
    const stored = t.dtype === 'BF16' || t.dtype === 'F16' || t.dtype === 'F32';
    const type = quantize && stored && t.shape.length >= 2 ? quantTypeFor(quantize, t.name, cols) : null;
    n += type ? quantBytes(type, t.nbytes / (t.dtype === 'F32' ? 4 : 2) / cols, cols) : t.nbytes;
  }
  return n;
}

const gb = (n: number): string => `${(n / 1e9).toFixed(1)} GB`;

/** Throw when the weights alone would not fit in `available` bytes. */
export function checkWeightsFit(tensors: readonly TensorInfo[], quantize: QuantizeMode | undefined, available: number,
  quantBytes: QuantBytes = ggmlBytes): void {
  const need = residentWeightBytes(tensors, quantize, quantBytes);
  if (need <= available) return;
  const smaller = QUANTIZE_MODES.filter((m) => m !== quantize)
    .map((m) => ({ m, bytes: residentWeightBytes(tensors, m, quantBytes) }))
    .filter((o) => o.bytes < need)
    .map((o) => `--quantize ${o.m} needs about ${gb(o.bytes)}${o.bytes <= available ? ' (fits)' : ''}`);
  throw new DeltaserveError('bad_config',
    `the model's weights need about ${gb(need)} of memory${quantize ? ` with --quantize ${quantize}` : ' as stored'}, ` +
    `but only ${gb(available)} is available` + (smaller.length > 0 ? `; ${smaller.join(', ')}` : ''));
}
