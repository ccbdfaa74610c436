// The data-movement ops and the MoE expert mixing of the Kernels interface for backends
// whose tensors are Float32Array / Int32Array views (ref and wasm): one implementation,
// so both compute the same bits. The arithmetic here is the definition the interface
// states (types.ts) for every backend.
import type { ExpertMats, Kernels, MoeFusion, MoeScratch, ReadRange } from './types.js';

export function view(t: Float32Array, offset: number, length: number): Float32Array {
  if (offset < 0 || length < 0 || offset + length > t.length) {
    throw new RangeError(`view [${offset}, ${offset + length}) of a tensor of ${t.length} elements`);
  }
  return t.subarray(offset, offset + length);
}

/** gatherPicked for host-memory rows: out[outOffset + i] = x[i·stride + ids[i]]. */
export function gatherPicked(out: Float32Array, outOffset: number, x: Float32Array, ids: Int32Array, m: number, stride: number): void {
  if (outOffset + m > out.length || m > ids.length) throw new RangeError(`gatherPicked: ${m} rows past the tensors`);
  for (let i = 0; i < m; i++) {
    const id = ids[i]!;
    if (!(id >= 0 && id < stride && i * stride + id < x.length)) throw new RangeError(`gatherPicked: row ${i}'s id ${id} outside its row of ${stride}`);
    out[outOffset + i] = x[i * stride + id]!;
  }
}

/** argmaxRowsMasked for host-memory rows: each masked row copied, its clear ids set to −∞,
 * then the backend's `argmax` (the ref's ids). */
export function argmaxRowsMasked(argmax: Kernels['argmax'], out: Int32Array, outOffset: number, x: Float32Array, m: number, n: number,
  stride: number, masks: readonly (Uint32Array | null)[]): void {
  if (masks.length !== m) throw new RangeError(`argmaxRowsMasked: ${masks.length} masks for ${m} rows`);
  if (outOffset + m > out.length || (m > 0 && (m - 1) * stride + n > x.length)) throw new RangeError(`argmaxRowsMasked: ${m} rows past the tensors`);
  const row = new Float32Array(n);
  for (let r = 0; r < m; r++) {
    const mask = masks[r];
    const src = x.subarray(r * stride, r * stride + n);
    if (!mask) {
      argmax(out.subarray(outOffset + r, outOffset + r + 1), src, 1, n);
      continue;
    }
    for (let i = 0; i < n; i++) row[i] = (((mask[i >>> 5] ?? 0) >>> (i & 31)) & 1) === 1 ? src[i]! : -Infinity;
    argmax(out.subarray(outOffset + r, outOffset + r + 1), row, 1, n);
  }
}

/** ids[offset, offset + m) of a kernel int32 tensor (embedIds on CPU backends: then embed). */
export function idsIn(ids: Int32Array, offset: number, m: number): Int32Array {
  if (offset < 0 || m < 0 || offset + m > ids.length) throw new RangeError(`embedIds: ids [${offset}, ${offset + m}) of a tensor of ${ids.length}`);
  return ids.subarray(offset, offset + m);
}

export function copyRows(dst: Float32Array, dstOffset: number, dstStride: number, src: Float32Array, srcOffset: number,
  srcStride: number, rows: number, width: number): void {
  if (rows <= 0) return;
  if (srcOffset + (rows - 1) * srcStride + width > src.length || dstOffset + (rows - 1) * dstStride + width > dst.length) {
    throw new RangeError(`copyRows: ${rows} rows of ${width} past a tensor's end`);
  }
  if (srcStride === width && dstStride === width) {
    dst.set(src.subarray(srcOffset, srcOffset + rows * width), dstOffset);
    return;
  }
  for (let r = 0; r < rows; r++) {
    const s = srcOffset + r * srcStride;
    dst.set(src.subarray(s, s + width), dstOffset + r * dstStride);
  }
}

export function gatherRows(dst: Float32Array, src: Float32Array, rows: ArrayLike<number>, width: number): void {
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    if (!(r >= 0 && (r + 1) * width <= src.length)) throw new RangeError(`gatherRows: row ${r} out of range`);
    dst.set(src.subarray(r * width, (r + 1) * width), i * width);
  }
}

/** fill of every run, in order. */
export function fillRuns(dst: Float32Array, runs: readonly { readonly offset: number; readonly length: number }[], value: number): void {
  for (const r of runs) fill(dst, r.offset, r.length, value);
}

export function fill(dst: Float32Array, offset: number, length: number, value: number): void {
  if (offset < 0 || length < 0 || offset + length > dst.length) throw new RangeError(`fill: ${length} elements at ${offset} past ${dst.length}`);
  dst.fill(value, offset, offset + length);
}

export function write(dst: Float32Array, offset: number, src: ArrayLike<number>): void {
  if (offset + src.length > dst.length) throw new RangeError(`write: ${src.length} elements at ${offset} past ${dst.length}`);
  dst.set(src, offset);
}

/** Views, at once: the memory is the host's. */
export function readBack(ranges: readonly ReadRange<Float32Array>[]): Float32Array[] {
  return ranges.map((r) => view(r.t, r.offset, r.length));
}

/** Copies, at once (the next write may change the views readBack would give). */
export function stage(ranges: readonly ReadRange<Float32Array>[]): { readonly data: Float32Array[] } {
  return { data: ranges.map((r) => view(r.t, r.offset, r.length).slice()) };
}

export function addSigmoidScaled(out: Float32Array, y: Float32Array, g: Float32Array, m: number, d: number): void {
  for (let i = 0; i < m; i++) {
    const gate = 1 / (1 + Math.exp(-g[i]!));
    for (let j = 0; j < d; j++) out[i * d + j] = out[i * d + j]! + gate * y[i * d + j]!;
  }
}

/** down(up(x) ⊙ silu(gate(x))) over n rows, on the backend's matmulGroup, matmul and mulSilu. */
function expertMlp(k: Kernels, e: ExpertMats, x: Float32Array, out: Float32Array, n: number, s: MoeScratch): void {
  const inter = e.gate.rows;
  const gate = s.gate.subarray(0, n * inter);
  const up = s.up.subarray(0, n * inter);
  k.matmulGroup(x, n, [{ out: gate, w: e.gate }, { out: up, w: e.up }]);
  k.mulSilu(up, up, gate, n * inter);
  k.matmul(out, up, e.down, n);
}

/** Kernels.moeExperts: each expert over its rows in ascending (row, slot) order, results
 * parked per (row, slot), then per row the slots summed in order: out = Σ_s fround(out +
 * w_s·y_s) from 0 (f64 product and sum, rounded to f32 after every slot). */
export function moeExperts(k: Kernels, out: Float32Array, x: Float32Array, ids: Int32Array, weights: Float32Array, m: number,
  topK: number, experts: readonly ExpertMats[], s: MoeScratch, fused?: MoeFusion): void {
  if (m <= 0) return;
  if (fused?.route) k.moeRoute(ids, weights, fused.route.logits, m, experts.length, topK, fused.route.renormalize);
  const h = experts[0]!.gate.cols;
  const sel = new Int32Array(m * topK); // (row, slot) indices routed to one expert
  for (let ex = 0; ex < experts.length; ex++) {
    let n = 0;
    for (let i = 0; i < m * topK; i++) if (ids[i] === ex) sel[n++] = i;
    if (n === 0) continue;
    for (let j = 0; j < n; j++) {
      const row = Math.floor(sel[j]! / topK);
      s.rowsIn.set(x.subarray(row * h, (row + 1) * h), j * h);
    }
    expertMlp(k, experts[ex]!, s.rowsIn, s.rowsOut, n, s);
    for (let j = 0; j < n; j++) s.slot.set(s.rowsOut.subarray(j * h, (j + 1) * h), sel[j]! * h);
  }
  out.subarray(0, m * h).fill(0);
  for (let i = 0; i < m; i++) {
    const o = out.subarray(i * h, (i + 1) * h);
    for (let sl = 0; sl < topK; sl++) {
      const wgt = weights[i * topK + sl]!;
      const src = s.slot.subarray((i * topK + sl) * h, (i * topK + sl + 1) * h);
      for (let d = 0; d < h; d++) o[d] = o[d]! + wgt * src[d]!;
    }
  }
  const tail = fused?.tail;
  if (!tail) return;
  const down = tail.shared?.down;
  if (down) {
    k.mulSilu(down.up, down.up, down.gate, m * down.w.cols);
    k.matmul(tail.shared!.y, down.up, down.w, m);
  }
  if (tail.shared) k.addSigmoidScaled(out, tail.shared.y, tail.shared.logit, m, h);
  k.add(tail.residual, tail.residual, out, m * h);
}
