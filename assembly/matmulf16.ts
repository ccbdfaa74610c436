// f16 panel matmul (GGUF F16 weights): the entry point matmulF16 and its per-M paths. The
// panel layout, the exact f16 → f32 widening (and its 2¹¹² prescaled form, path f64) and the
// canonical f32 chain of every output element are those of matmul.ts; every path below gives
// the f32 chain's bits for every row, whatever M or the thread's column range.
import { f16Scale, panelsPerTile, rows4panel, rowByPanels, rowsByRow, WIDE_MIN_M, wideTiles } from './matmul';

/** Whether every x of the row at xr (k values) is below 2¹⁶ in magnitude (NaN: no). */
function prescalable(xr: usize, k: i32): bool {
  const lim = f32x4.splat(65536);
  let ok = i32x4.splat(-1);
  let i = 0;
  for (; i + 4 <= k; i += 4) ok = v128.and(ok, f32x4.lt(f32x4.abs(v128.load(xr + (<usize>i << 2))), lim));
  let fits = i32x4.all_true(ok);
  for (; i < k; i++) fits = fits && Mathf.abs(load<f32>(xr + (<usize>i << 2))) < 65536;
  return fits;
}

// 4-row blocks widened in registers (f16InRegister) run 4 ≤ M < WIDE_MIN_M; from there tiles
// widened once into f32 (wideTiles) are faster. AMD EPYC (Zen 4), Node 24, one thread,
// 3584×1024: in registers 18–21 GMAC/s at M = 4 where the widened tiles ran 9–15; from M = 12
// the widened tiles win (21–25 at M ≥ 32 against 17–19).

/** w: [ceil(N/8), K, 8] f16 panels (lane order as bf16). M ≥ 12: each tile of panels widened
 * once into f32 (wideTiles). Below, every row whose |x| are all below 2¹⁶ is copied once times
 * 2¹¹² into tmp (same layout as x; M < 12 rows of k f32 fit panelTmpBytes(k) ≥ 128·k bytes)
 * and its panels are widened without the 2¹¹² (path f64, see loOn: two multiplies fewer per
 * panel row and one constant fewer, so V8 keeps all 8 accumulators in registers); other rows
 * run as stored (path f32). M < 4: rows one by one over the whole range (decode streams);
 * 4 ≤ M < 12: f16InRegister. The widening is exact, so every path gives the f32 chain's bits
 * (batch-invariant). tmp: panelTmpBytes(k) bytes per thread. */
export function matmulF16(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize): void {
  if (m >= WIDE_MIN_M) {
    wideTiles<i16>(out, x, w, m, n, k, n0, n1, tmp);
    return;
  }
  let scaled = 0; // bit r: row r is prescalable, and tmp holds it times 2¹¹²
  for (let r = 0; r < m; r++) if (scaleRow(tmp, x, k, r)) scaled |= 1 << r;
  if (m < 4) {
    for (let mi = 0; mi < m; mi++) rowOnPath(out, x, w, n, k, mi, n0 >> 3, (n1 + 7) >> 3, n1, tmp, scaled);
  } else {
    f16InRegister(out, x, w, m, n, k, n0, n1, tmp, scaled);
  }
}

/** Tiles of ~128 KiB of f16 panels stay in L2 while each 4-row block of x, then each
 * leftover row, passes over them. A block of 4 prescaled rows is widened in registers once
 * for all 4; the other rows run one by one on their path. */
function f16InRegister(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize, scaled: i32): void {
  const g0 = n0 >> 3;
  const g1 = (n1 + 7) >> 3;
  const tile = panelsPerTile(k << 4);
  const m4 = m & ~3;
  for (let t0 = g0; t0 < g1; t0 += tile) {
    const t1 = min(t0 + tile, g1);
    for (let mb = 0; mb < m4; mb += 4) {
      if (((scaled >> mb) & 15) == 15) {
        for (let g = t0; g < t1; g++) rows4panel<i16, f64>(out, tmp, w, n, k, mb, g, n1);
      } else {
        for (let mi = mb; mi < mb + 4; mi++) rowOnPath(out, x, w, n, k, mi, t0, t1, n1, tmp, scaled);
      }
    }
    for (let mi = m4; mi < m; mi++) rowOnPath(out, x, w, n, k, mi, t0, t1, n1, tmp, scaled);
  }
}

/** Row mi × panels [p0, p1): from tmp on path f64 when bit mi of `scaled` is set, else as
 * stored. */
// @ts-ignore: decorator
@inline function rowOnPath(out: usize, x: usize, w: usize, n: i32, k: i32, mi: i32, p0: i32, p1: i32, n1: i32, tmp: usize, scaled: i32): void {
  if ((scaled >> mi) & 1) rowByPanels<i16, f64>(out, tmp, w, n, k, mi, p0, p1, n1);
  else rowByPanels<i16, f32>(out, x, w, n, k, mi, p0, p1, n1);
}

/** If every |x| of row r of x ([·, k] f32) is below 2¹⁶: row r of dst = that row times 2¹¹²
 * (exact), and true. Else false (dst untouched). */
function scaleRow(dst: usize, x: usize, k: i32, r: i32): bool {
  const off = (<usize>r * <usize>k) << 2;
  const xr = x + off;
  if (!prescalable(xr, k)) return false;
  const d = dst + off;
  const fs = f16Scale(k);
  let i = 0;
  for (; i + 4 <= k; i += 4) v128.store(d + (<usize>i << 2), f32x4.mul(v128.load(xr + (<usize>i << 2)), fs));
  const scale = f32x4.extract_lane(fs, 0);
  for (; i < k; i++) store<f32>(d + (<usize>i << 2), load<f32>(xr + (<usize>i << 2)) * scale);
  return true;
}
