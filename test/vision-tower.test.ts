// The ref vision tower (f32 storage) equals a separate, straightforward float64
// implementation of the same math (written here from docs/vision.md, sharing no code with
// src/vision beyond the weight structures), on the repo's fixture tower and on random
// deepstack configs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeImage } from '../src/vision/tower.js';
import type { VisionConfig } from '../src/vision/config.js';
import type { ImageGrid } from '../src/vision/grid.js';
import type { LayerNormWeights, Linear, MergerWeights, VisionWeights } from '../src/vision/weights.js';
import { Rng } from '../src/util/rng.js';
import { fixtureVisionConfig, fixtureVisionWeights, randomArray, randomVisionWeights } from './vision-helpers.js';

// ---------------------------------------------------------------------------------------
// float64 reference

function lin(x: Float64Array, m: number, l: Linear): Float64Array {
  const out = new Float64Array(m * l.outDim);
  for (let r = 0; r < m; r++) {
    for (let o = 0; o < l.outDim; o++) {
      let s = l.b[o]!;
      for (let i = 0; i < l.inDim; i++) s += x[r * l.inDim + i]! * l.w[o * l.inDim + i]!;
      out[r * l.outDim + o] = s;
    }
  }
  return out;
}

function ln(x: Float64Array, m: number, dim: number, n: LayerNormWeights): Float64Array {
  const out = new Float64Array(m * dim);
  for (let r = 0; r < m; r++) {
    const row = x.subarray(r * dim, (r + 1) * dim);
    const mean = row.reduce((a, b) => a + b, 0) / dim;
    const variance = row.reduce((a, b) => a + (b - mean) ** 2, 0) / dim;
    for (let i = 0; i < dim; i++) out[r * dim + i] = ((row[i]! - mean) / Math.sqrt(variance + 1e-6)) * n.w[i]! + n.b[i]!;
  }
  return out;
}

/** erf by its alternating Maclaurin series (|x| < 3) or erfc's continued fraction. */
function erf64(x: number): number {
  const a = Math.abs(x);
  if (a < 3) {
    let term = a;
    let sum = a;
    for (let n = 1; n < 120; n++) {
      term *= (-a * a) / n;
      sum += term / (2 * n + 1);
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  let f = 0; // erfc(a) = e^(−a²)/√π · 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + …))))
  for (let k = 60; k >= 1; k--) f = (k / 2) / (a + f);
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / (a + f);
  return Math.sign(x) * (1 - erfc);
}

const gelu = (x: number): number => 0.5 * x * (1 + erf64(x / Math.SQRT2));
const geluTanh = (x: number): number => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));

/** (row, col) of token t: windows of m×m patches, row-major, frame after frame. */
function coordOf(t: number, g: ImageGrid, m: number): [number, number] {
  const inFrame = t % (g.h * g.w);
  const win = Math.floor(inFrame / (m * m));
  const within = inFrame % (m * m);
  const winsPerRow = g.w / m;
  return [Math.floor(win / winsPerRow) * m + Math.floor(within / m), (win % winsPerRow) * m + (within % m)];
}

function posEmbed(cfg: VisionConfig, table: Float32Array, g: ImageGrid, row: number, col: number): Float64Array {
  const side = Math.sqrt(cfg.numPositionEmbeddings);
  const at = (i: number, n: number): number => (n === 1 ? 0 : (i * (side - 1)) / (n - 1));
  const y = at(row, g.h);
  const x = at(col, g.w);
  const y0 = Math.floor(y), x0 = Math.floor(x);
  const y1 = Math.min(y0 + 1, side - 1), x1 = Math.min(x0 + 1, side - 1);
  const d = cfg.hiddenSize;
  const out = new Float64Array(d);
  const put = (r: number, c: number, wt: number): void => {
    for (let j = 0; j < d; j++) out[j] = out[j]! + wt * table[(r * side + c) * d + j]!;
  };
  put(y0, x0, (1 - (y - y0)) * (1 - (x - x0)));
  put(y0, x1, (1 - (y - y0)) * (x - x0));
  put(y1, x0, (y - y0) * (1 - (x - x0)));
  put(y1, x1, (y - y0) * (x - x0));
  return out;
}

/** Rotate each head's vector: pair (i, i+hd/2) by angle pos·θ^(−k/(hd/4)), pos = row for
 * i < hd/4 (k = i), col otherwise (k = i − hd/4). */
function rotate(v: Float64Array, off: number, cfg: VisionConfig, row: number, col: number): void {
  const hd = cfg.headDim;
  for (let h = 0; h < cfg.numHeads; h++) {
    for (let i = 0; i < hd / 2; i++) {
      const pos = i < hd / 4 ? row : col;
      const k = i < hd / 4 ? i : i - hd / 4;
      const ang = pos * Math.pow(cfg.ropeTheta, -k / (hd / 4));
      const a = off + h * hd + i, b = a + hd / 2;
      const [x1, x2] = [v[a]!, v[b]!];
      v[a] = x1 * Math.cos(ang) - x2 * Math.sin(ang);
      v[b] = x1 * Math.sin(ang) + x2 * Math.cos(ang);
    }
  }
}

function merger64(cfg: VisionConfig, mw: MergerWeights, x: Float64Array, n: number): Float64Array {
  const unit = cfg.spatialMergeSize ** 2;
  const normed = mw.postShuffleNorm ? ln(x, n / unit, cfg.hiddenSize * unit, mw.norm) : ln(x, n, cfg.hiddenSize, mw.norm);
  return lin(lin(normed, n / unit, mw.fc1).map(gelu), n / unit, mw.fc2);
}

function tower64(cfg: VisionConfig, w: VisionWeights, patches: Float32Array, g: ImageGrid): { embeds: Float64Array; deepstack: Float64Array[] } {
  const n = g.t * g.h * g.w;
  const d = cfg.hiddenSize;
  const hd = cfg.headDim;
  const m = cfg.spatialMergeSize;
  const x = lin(Float64Array.from(patches), n, w.patchEmbed);
  const coords = Array.from({ length: n }, (_, t) => coordOf(t, g, m));
  coords.forEach(([r, c], t) => posEmbed(cfg, w.posEmbed, g, r, c).forEach((v, j) => { x[t * d + j] = x[t * d + j]! + v; }));
  const deepstack: Float64Array[] = [];
  const frame = g.h * g.w;
  w.blocks.forEach((b, l) => {
    const qkv = lin(ln(x, n, d, b.norm1), n, b.qkv);
    coords.forEach(([r, c], t) => { rotate(qkv, t * 3 * d, cfg, r, c); rotate(qkv, t * 3 * d + d, cfg, r, c); });
    const att = new Float64Array(n * d);
    for (let i = 0; i < n; i++) {
      const f0 = Math.floor(i / frame) * frame;
      for (let h = 0; h < cfg.numHeads; h++) {
        const logits = Array.from({ length: frame }, (_, j) => {
          let s = 0;
          for (let e = 0; e < hd; e++) s += qkv[i * 3 * d + h * hd + e]! * qkv[(f0 + j) * 3 * d + d + h * hd + e]!;
          return s / Math.sqrt(hd);
        });
        const mx = Math.max(...logits);
        const p = logits.map((s) => Math.exp(s - mx));
        const z = p.reduce((a, v) => a + v, 0);
        for (let e = 0; e < hd; e++) {
          let s = 0;
          for (let j = 0; j < frame; j++) s += (p[j]! / z) * qkv[(f0 + j) * 3 * d + 2 * d + h * hd + e]!;
          att[i * d + h * hd + e] = s;
        }
      }
    }
    lin(att, n, b.proj).forEach((v, i) => { x[i] = x[i]! + v; });
    const act = cfg.hiddenAct === 'gelu' ? gelu : geluTanh;
    lin(lin(ln(x, n, d, b.norm2), n, b.fc1).map(act), n, b.fc2).forEach((v, i) => { x[i] = x[i]! + v; });
    const k = cfg.deepstackVisualIndexes.indexOf(l);
    if (k >= 0) deepstack.push(merger64(cfg, w.deepstack[k]!, x, n));
  });
  return { embeds: merger64(cfg, w.merger, x, n), deepstack };
}

// ---------------------------------------------------------------------------------------

/** max |a − b| / max |b|. */
function relErr(a: Float32Array, b: Float64Array): number {
  let num = 0, den = 0;
  for (let i = 0; i < b.length; i++) {
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  return num / den;
}

const TOL = 2e-5;

function check(cfg: VisionConfig, w: VisionWeights, g: ImageGrid, seed: number): void {
  const patches = randomArray(new Rng(seed), g.t * g.h * g.w * cfg.inChannels * cfg.temporalPatchSize * cfg.patchSize ** 2, 1);
  const got = encodeImage(cfg, w, patches, g);
  const want = tower64(cfg, w, patches, g);
  assert.equal(got.tokens, (g.t * g.h * g.w) / cfg.spatialMergeSize ** 2);
  assert.equal(got.embeds.length, want.embeds.length);
  const e = relErr(got.embeds, want.embeds);
  assert.ok(e < TOL, `grid ${g.t}×${g.h}×${g.w}: ref vs f64 relative error ${e}`);
  assert.ok(want.embeds.some((v) => Math.abs(v) > 1e-3), 'non-trivial output');
  assert.equal(got.deepstack.length, cfg.deepstackVisualIndexes.length);
  got.deepstack.forEach((ds, i) => {
    const ed = relErr(ds, want.deepstack[i]!);
    assert.ok(ed < TOL, `deepstack ${i}: relative error ${ed}`);
  });
}

test('fixture tower: ref == float64 reference on square, wide, tall and table-sized grids', () => {
  const cfg = fixtureVisionConfig();
  const w = fixtureVisionWeights(cfg);
  for (const [i, g] of [{ t: 1, h: 2, w: 2 }, { t: 1, h: 4, w: 6 }, { t: 1, h: 8, w: 4 }, { t: 1, h: 4, w: 4 }].entries()) check(cfg, w, g, 100 + i);
});

test('video-shaped grid (t = 2): attention stays within each frame', () => {
  const cfg = fixtureVisionConfig();
  check(cfg, fixtureVisionWeights(cfg), { t: 2, h: 2, w: 4 }, 7);
});

test('deepstack mergers (Qwen3-VL): one output per listed block, post-shuffle LayerNorm', () => {
  const cfg: VisionConfig = { ...fixtureVisionConfig(), depth: 3, numHeads: 4, headDim: 8, deepstackVisualIndexes: [2, 0], hiddenAct: 'gelu', numPositionEmbeddings: 9 };
  check(cfg, randomVisionWeights(cfg, 5), { t: 1, h: 6, w: 4 }, 9);
});

test('the comparison is sensitive: position signals matter beyond the tolerance', () => {
  const cfg = fixtureVisionConfig();
  const w = fixtureVisionWeights(cfg);
  const g = { t: 1, h: 4, w: 6 };
  const patches = randomArray(new Rng(3), 24 * 1536, 1);
  const base = tower64(cfg, w, patches, g).embeds;
  const noRotary = encodeImage({ ...cfg, ropeTheta: 1e30 }, w, patches, g).embeds; // angles ≈ 0 beyond k = 0
  assert.ok(relErr(noRotary, base) > 100 * TOL, 'rotary changes the output');
  const flat = { ...w, posEmbed: new Float32Array(w.posEmbed.length) };
  assert.ok(relErr(encodeImage(cfg, flat, patches, g).embeds, base) > 100 * TOL, 'position table changes the output');
});
