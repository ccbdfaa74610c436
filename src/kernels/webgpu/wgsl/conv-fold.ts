// The causal conv (Kernels.causalConvSeqs: one row per sequence, no scratch; or, the steps
// variant below, a verify's rows and scratch windows) folded into
// the store of the float in_proj matmul (wgsl/matmul-group.ts, wgsl/matmul-columns.ts;
// kernels/webgpu/conv-launch.ts decides and binds it). Channel ch of the conv is output
// column ch of the qkv weight (Col0 + col of a conv segment); exactly one thread of one
// workgroup stores (row, column), so it alone reads the window of that row's sequence at
// channel ch, forms the conv and writes the window back: no other invocation touches
// those K−1 words.
// Invariant (the same bits as the matmul, then CAUSAL_CONV_SEQS / convChannelsShader): the
// pre-conv value is the matmul's stored sum; acc = 0, then acc = acc + WC[ch·K + j] · v[j]
// for j = 0..K−1 over the virtual rows [window; value], then silu — the conv kernels'
// expression in their order. The window's new rows are rows 1..K−1 of v, each written after
// all its reads. The pre-conv value itself is not stored (Kernels.matmulGroup's conv lets a
// folding backend leave group[0].out unwritten).
// Bindings (after the matmul's): WC f32 [C, K] (the conv weight widened), WIN the windows'
// buffer ([K−1, C] each at its offset), CT i32 [M] per matmul row the offset of its
// sequence's window in WIN (−1: no conv sequence owns the row: nothing is written), COUT the
// post-conv rows' buffer.
// params (matmul_group): convOutOff (the post-conv rows [M, C] in COUT), convTable (CT's offset).

// The steps variant (ConvFoldShape.steps: a verify's rows, the 8-column kernel only,
// convFoldSteps): CT holds CONV_STEP_WORDS per matmul row — window offset (−1: the row
// starts no sequence), t (the sequence's rows from this one), scratch offset, use scratch —
// and SCR (one more binding) the scratch windows [t, K−1, C] of CAUSAL_CONV_SEQS.

/** Storage bindings the fold adds to a matmul dispatch (the steps variant: one more, SCR). */
export const CONV_FOLD_BINDINGS = 4;
export const CONV_FOLD_STEP_BINDINGS = 5;
/** i32 words of CT per matmul row in the steps variant. */
export const CONV_STEP_WORDS = 4;

/** The fold's declarations, bindings from `first` (`steps`: SCR after them). */
export function convFoldDecls(first: number, steps = false): string {
  return `@group(0) @binding(${first}) var<storage, read_write> WC: array<f32>;
@group(0) @binding(${first + 1}) var<storage, read_write> WIN: array<f32>;
@group(0) @binding(${first + 2}) var<storage, read> CT: array<i32>;
@group(0) @binding(${first + 3}) var<storage, read_write> COUT: array<f32>;${steps ? `
@group(0) @binding(${first + 4}) var<storage, read_write> SCR: array<f32>;` : ''}`;
}

/** The steps variant's conv of (sequence, column): the thread of the sequence's first row
 * `row` reads the pre-conv values OUT[o + i·C] of the sequence's rows i = 0..t−1 (the
 * matmul's stores, visible after a storageBarrier) and runs convChannelsShader's body over
 * them: per step acc = 0, acc = acc + WC[ch·K + j] · v[j], silu, then with scratch the
 * step's window (virtual rows i + 1 .. i + K − 1) to SCR[so + (i·(K−1) + r)·C + ch], the
 * register window shifted; without scratch the final window to WIN (after all its reads). */
export function convFoldSteps(row: string, taps: number): string {
  if (!Number.isInteger(taps) || taps < 1) throw new RangeError(`conv fold: ${taps} taps`);
  const hist = taps - 1;
  const js = Array.from({ length: taps }, (_, j) => j);
  const hs = js.slice(0, hist);
  return `let cr = ${row};
      let cd = pu(P_convTable) + ${CONV_STEP_WORDS}u * cr;
      let cw = CT[cd];
      if (cw >= 0) {
        let cc = pu(SEG_OutStride);
        let ch = pu(SEG_Col0) + col;
        let wb = u32(cw);
        let cn = u32(CT[cd + 1u]);
        let sb = u32(CT[cd + 2u]);
        let scr = CT[cd + 3u] == 1;
        ${hs.map((j) => `var cv${j} = WIN[wb + ${j}u * cc + ch];`).join(' ')}
        for (var ci = 0u; ci < cn; ci++) {
          let cv${hist} = OUT[o + ci * cc];
          var ca = 0.0;
          ${js.map((j) => `ca = ca + WC[ch * ${taps}u + ${j}u] * cv${j};`).join(' ')}
          COUT[pu(P_convOutOff) + (cr + ci) * cc + ch] = silu(ca);
          if (scr) { ${hs.map((j) => `SCR[sb + (ci * ${hist}u + ${j}u) * cc + ch] = cv${j + 1};`).join(' ')} }
          ${hs.map((j) => `cv${j} = cv${j + 1};`).join(' ')}
        }
        if (!scr) { ${hs.map((j) => `WIN[wb + ${j}u * cc + ch] = cv${j};`).join(' ')} }
      }`;
}

/** The store of a conv segment's (row, column) value `v`: `row` the matmul row, `col` the
 * segment's column, SEG_OutStride = C (the conv's channels: the qkv output's width),
 * SEG_Col0 + col the channel. `taps` (K) compiled in. */
export function convFoldStore(v: string, row: string, taps: number): string {
  if (!Number.isInteger(taps) || taps < 1) throw new RangeError(`conv fold: ${taps} taps`);
  const hist = taps - 1;
  const js = Array.from({ length: taps }, (_, j) => j);
  // the taps unrolled into scalars (no private array: it would sit beside the multi-column
  // kernel's live sums); cv<j> is virtual row j of [window; value]
  return `let cr = ${row};
      let cw = CT[pu(P_convTable) + cr];
      if (cw >= 0) {
        let cc = pu(SEG_OutStride);
        let ch = pu(SEG_Col0) + col;
        let wb = u32(cw);
        ${js.map((j) => `let cv${j} = ${j < hist ? `WIN[wb + ${j}u * cc + ch]` : v};`).join(' ')}
        var ca = 0.0;
        ${js.map((j) => `ca = ca + WC[ch * ${taps}u + ${j}u] * cv${j};`).join(' ')}
        COUT[pu(P_convOutOff) + cr * cc + ch] = silu(ca);
        ${js.slice(0, hist).map((j) => `WIN[wb + ${j}u * cc + ch] = cv${j + 1};`).join(' ')}
      }`;
}

/** A matmul variant's fold: the conv's taps and which of its segments are conv segments
 * (bit s: segment s's columns are conv channels). */
export interface ConvFoldShape {
  readonly taps: number;
  readonly mask: number;
  /** The steps variant (convFoldSteps; 8-column kernel only). */
  readonly steps?: boolean;
}

/** Whether segment `s` of a variant with `conv` stores through the conv. */
export function convSegment(conv: ConvFoldShape, s: number): boolean {
  return ((conv.mask >> s) & 1) === 1;
}

/** The variant key's suffix of a fold ('' without one). */
export function convFoldKey(conv: ConvFoldShape | null): string {
  return conv ? `_conv${conv.taps}m${conv.mask}${conv.steps ? 's' : ''}` : '';
}
