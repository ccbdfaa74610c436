// topCandidates split over segments (kernels/webgpu/top-candidates.ts): pass 1 selects each
// segment's top c, pass 2 merges the S·c survivors. The sets must be the ref's bit for bit
// (kernels/top-candidates.ts) whatever S: ties on a coarse grid that straddle segment
// boundaries, a tie run placed across one boundary, NaN rows, ±∞, ±0, segments shorter than
// c, more segments than ids, and a Qwen3.5-sized row (248,320 ids) at the automatic S (c up
// to 2048, top-k 1000's).
// Also the dispatch count (2 when split, 1 when not) and the choice of S.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { TOP_TARGET_WORKGROUPS, topCandidatesOn, topSegments } from '../src/kernels/webgpu/top-candidates.js';
import { candidateRows } from './candidate-rows.js';
import { gpuUnderTest, readI32, run } from './webgpu-helpers.js';

const ref = createRefKernels();
let g: WebGpuKernels;
before(async () => { g = await gpuUnderTest(); });
after(() => g?.dispose());

function sameBits(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]}`);
}

/** The webgpu sets of x (S = `segments`, or automatic) == the ref's; returns the dispatches. */
async function check(x: Float32Array, m: number, n: number, stride: number, c: number, segments: number | undefined, what: string): Promise<number> {
  const want = { ids: new Int32Array(m * c), vals: new Float32Array(m * c) };
  ref.topCandidates(want.ids, want.vals, 0, x, m, n, stride, c);
  const ids = g.alloc.tensor([m * c + 2], 'i32');
  const vals = g.alloc.tensor([m * c + 2]);
  const gx = g.alloc.upload(x);
  let dispatches = -1;
  const [got] = await run(g, (e) => {
    const d0 = e.dispatchCount;
    topCandidatesOn(g, e, { ids, vals, outOffset: 1, x: gx, m, n, stride, c, segments });
    dispatches = e.dispatchCount - d0;
  }, vals);
  sameBits((await readI32(g, ids)).subarray(1, 1 + m * c), want.ids, `${what}: ids`);
  sameBits(got!.subarray(1, 1 + m * c), want.vals, `${what}: vals`);
  return dispatches;
}

describe('webgpu topCandidates in segments', () => {
  test('forced segments == the ref bit for bit: ties across boundaries, NaN rows, ±∞, ±0, segments shorter than c, more segments than ids', async () => {
    for (const [n, c, segments] of [[1031, 64, 5], [1031, 7, 16], [1031, 64, 20], [3000, 16, 40], [100, 16, 200], [5, 8, 3], [1, 4, 2], [4099, 1, 64]] as const) {
      const m = 5;
      const { x, stride } = candidateRows(90 + n + segments, m, n);
      const what = `n ${n} c ${c} S ${segments}`;
      const split = await check(x, m, n, stride, c, segments, what);
      assert.equal(split, n >= 2 ? 2 : 1, `${what}: pass 1 and the merge (a 1-id row: one segment)`);
      assert.equal(await check(x, m, n, stride, c, 1, `${what}, one pass`), 1, 'one segment: one dispatch');
    }
  });

  test('a tie run across a segment boundary: the lowest ids of the tie value win, whichever segment holds them', async () => {
    const [n, c, segments] = [1024, 8, 4]; // segments of 256
    const m = 3;
    const stride = n;
    const x = new Float32Array(m * stride).fill(-1);
    // row 0: 5 values above, the tie value 0.5 at ids 250..265 (across the boundary at 256)
    for (const id of [3, 300, 700, 900, 1023]) x[id] = 2;
    for (let id = 250; id < 266; id++) x[id] = 0.5;
    // row 1: every id ties, −0 and +0 alternating: the +0 ids first (higher key), lowest ids
    for (let id = 0; id < n; id++) x[stride + id] = id % 2 === 0 ? -0 : 0;
    // row 2: the c-th value's ties only in the last segment, and NaN before them
    for (let id = 0; id < 768; id++) x[2 * stride + id] = NaN;
    for (let id = 1000; id < 1024; id++) x[2 * stride + id] = 7;
    await check(x, m, n, stride, c, segments, 'tie runs');
    await check(x, m, n, stride, 1, segments, 'tie runs, c = 1');
    await check(x, m, n, stride, 300, segments, 'tie runs, c past a segment');
  });

  test('a Qwen3.5 row (248,320 ids) at the automatic S == the ref; two dispatches (c up to 2048: top-k 1000)', async () => {
    const n = 248_320;
    for (const [m, c] of [[1, 64], [3, 256], [1, 2048]] as const) {
      const { x, stride } = candidateRows(7 + m, m, n);
      const s = topSegments(m, n, c);
      assert.ok(s > 1, `m ${m} c ${c}: split (S = ${s})`);
      assert.equal(await check(x, m, n, stride, c, undefined, `qwen row m ${m} c ${c} S ${s}`), 2);
    }
  });

  test('topSegments: m·S reaches the target or S sits at √(n/c); short rows stay whole', () => {
    const n = 248_320;
    for (const m of [1, 4, 32, 300]) {
      for (const c of [64, 256, 4096]) {
        const s = topSegments(m, n, c);
        assert.ok(s >= 1 && s <= Math.max(1, Math.floor(Math.sqrt(n / c))), `m ${m} c ${c}: S ${s} within √(n/c)`);
        assert.ok(m * s >= TOP_TARGET_WORKGROUPS || s === Math.floor(Math.sqrt(n / c)) || s === 1, `m ${m} c ${c}: S ${s}`);
      }
    }
    assert.equal(topSegments(1, 1024, 64), 1, 'a 1,024-id row: one pass');
    assert.equal(topSegments(300, n, 64), 1, '300 rows fill the GPU alone');
  });
});
