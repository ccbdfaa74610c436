// The command protocol shared by the main thread and the workers: a control block of
// Int32 slots plus Float64 arguments in one SharedArrayBuffer, and `executeChunk`, which
// runs chunk c of n of a command. Work is split only along output elements (matmul: output
// columns in 8-column panels; attention: (token, KV head) units; Gated DeltaNet: value heads;
// conv: channels), so every element is computed by exactly the same code whatever the
// thread count or chunking (split invariance). Chunks are claimed dynamically, so a
// descheduled worker delays nobody: the main thread takes its chunks.
import type { KernelExports } from './module.js';

/** Int32 slots of the control block. */
export const GEN = 0; // bumped by the main thread for every command
export const DONE = 1; // workers finished with the current command
export const SLEEPERS = 2; // workers blocked in Atomics.wait on GEN
export const CMD = 3;
export const ARENA = 4; // arena index (the instance to run on)
export const ERROR = 5; // non-zero: a worker failed (its tid)
export const MAIN_WAITING = 6; // the main thread sleeps on DONE / CHUNKS_DONE
export const CLAIM = 7; // (GEN & 0x7fff) << 16 | next unclaimed chunk
export const NCHUNKS = 8;
export const CHUNKS_DONE = 9;
export const BGEN = 10; // GEN of the latest barrier command (workers run each once)
/** A CLAIM value no command's tag matches (tags are ≤ 0x7fff << 16). */
export const NO_CLAIM = -1;
export const CTL_INTS = 16;
export const ARGS_OFFSET = CTL_INTS * 4;
export const ARGS = 32;
export const CTL_BYTES = ARGS_OFFSET + ARGS * 8;

export const Cmd = {
  EXIT: 1,
  ADD_ARENA: 2,
  MATMUL: 3,
  ATTENTION: 4,
  GDN_RECURRENT: 5,
  GDN_CHUNKED: 6,
  CONV: 7,
  PROBE: 8,
  SAMPLE: 20, // sampling rows (assembly/sampling.ts); numbered apart from the model ops
  QMATMUL: 9,
} as const;

/** [lo, hi) of `total` items for thread tid of nt, boundaries multiples of `unit`. */
export function share(total: number, tid: number, nt: number, unit: number): [number, number] {
  const per = Math.ceil(Math.ceil(total / nt) / unit) * unit;
  const lo = Math.min(total, tid * per);
  return [lo, Math.min(total, lo + per)];
}

/** Tag of generation g in the CLAIM word. */
export function claimTag(g: number): number {
  return (g & 0x7fff) << 16;
}

/** Claim the next chunk of the command tagged `tag` (n chunks); -1 when none is left or
 * the command is no longer current. A successful claim proves the command's arguments
 * read before it are still current (the main thread rewrites them only after every chunk
 * has completed). */
export function claim(ctl: Int32Array, tag: number, n: number): number {
  for (;;) {
    const v = Atomics.load(ctl, CLAIM);
    if ((v & ~0xffff) !== tag) return -1;
    const c = v & 0xffff;
    if (c >= n) return -1;
    if (Atomics.compareExchange(ctl, CLAIM, v, v + 1) === v) return c;
  }
}

/** Run chunk c of n of command `cmd` with arguments `a` on thread tid (tid selects the
 * per-thread scratch). Argument layouts:
 *  MATMUL:        out x w m n k isBf16
 *  ATTENTION:     out q qStride kc vc pageTable pageSize start nH nKV hd units tmpBase tmpStride per
 *  GDN_RECURRENT: out qkv g beta state scratch t hk hv dk dv tmpBase tmpStride
 *  GDN_CHUNKED:   out qkv g beta state t hk hv dk dv tmpBase tmpStride pos0
 *  CONV:          out x window w wBf16 t c kw scratch
 *  PROBE:         base bytesPerChunk
 *  SAMPLE:        desc rows tmpBase tmpStride (one chunk per row)
 *  QMATMUL:       out q16 d s w m n k type tmpBase tmpStride q8 (columns in units of 4) */
export function executeChunk(ex: KernelExports, cmd: number, a: Float64Array, tid: number, c: number, nc: number): void {
  switch (cmd) {
    case Cmd.MATMUL: {
      const [lo, hi] = share(a[4]!, c, nc, 8);
      if (lo >= hi) return;
      if (a[6]) ex.matmulBf16(a[0]!, a[1]!, a[2]!, a[3]!, a[4]!, a[5]!, lo, hi);
      else ex.matmulF32(a[0]!, a[1]!, a[2]!, a[3]!, a[4]!, a[5]!, lo, hi);
      return;
    }
    case Cmd.ATTENTION: {
      const [lo, hi] = share(a[11]!, c, nc, 1);
      if (lo >= hi) return;
      ex.attention(a[0]!, a[1]!, a[2]!, a[3]!, a[4]!, a[5]!, a[6]!, a[7]!, a[8]!, a[9]!, a[10]!, lo, hi,
        a[12]! + tid * a[13]!, a[14]!);
      return;
    }
    case Cmd.GDN_RECURRENT: {
      const [lo, hi] = share(a[8]!, c, nc, 1);
      if (lo >= hi) return;
      ex.gdnRecurrent(a[0]!, a[1]!, a[2]!, a[3]!, a[4]!, a[5]!, a[6]!, a[7]!, a[8]!, a[9]!, a[10]!, lo, hi,
        a[11]! + tid * a[12]!);
      return;
    }
    case Cmd.GDN_CHUNKED: {
      const [lo, hi] = share(a[7]!, c, nc, 1);
      if (lo >= hi) return;
      ex.gdnChunked(a[0]!, a[1]!, a[2]!, a[3]!, a[4]!, a[5]!, a[6]!, a[7]!, a[8]!, a[9]!, lo, hi, a[10]! + tid * a[11]!, a[12]!);
      return;
    }
    case Cmd.CONV: {
      const [lo, hi] = share(a[6]!, c, nc, 4);
      if (lo >= hi) return;
      ex.causalConv(a[0]!, a[1]!, a[2]!, a[3]!, a[4]!, a[5]!, a[6]!, a[7]!, a[8]!, lo, hi);
      return;
    }
    case Cmd.SAMPLE: {
      const [lo, hi] = share(a[1]!, c, nc, 1);
      if (lo < hi) ex.sampleRows(a[0]!, lo, hi, a[2]! + tid * a[3]!);
      return;
    }
    case Cmd.QMATMUL: {
      const [lo, hi] = share(a[6]!, c, nc, 4);
      if (lo >= hi) return;
      ex.qmatmul(a[8]!, a[0]!, a[1]!, a[11]!, a[2]!, a[3]!, a[4]!, a[5]!, a[6]!, a[7]!, lo, hi, a[9]! + tid * a[10]!);
      return;
    }
    case Cmd.PROBE: {
      ex.streamRead(a[0]! + c * a[1]!, a[1]!);
      return;
    }
    default:
      throw new Error(`wasm kernels: unknown command ${cmd}`);
  }
}

/** Run every chunk of a command on the calling thread. */
export function executeAll(ex: KernelExports, cmd: number, a: Float64Array, nc: number): void {
  for (let c = 0; c < nc; c++) executeChunk(ex, cmd, a, 0, c, nc);
}
