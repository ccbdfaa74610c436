// bench --profile's kernel wrapper: it times only while enabled, keys matmuls by weight
// type, shape and M (a matmulGroup by its weights' list), counts every call, and passes
// results through unchanged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { KernelProfile } from '../src/cli/bench-profile.js';
import type { AnyKernels } from '../src/kernels/types.js';

test('KernelProfile: per-op calls and shares while enabled only; matmul keyed by weight; results unchanged', () => {
  const inner = createRefKernels() as unknown as AnyKernels;
  const prof = new KernelProfile(inner);
  const k = prof.kernels;
  const { weight, bytes } = k.allocWeight('f32', 3, 4);
  new Float32Array(bytes.buffer, bytes.byteOffset, 12).set([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  const w = k.packWeight(weight);
  const x = k.alloc(8);
  k.write(x, 0, [1, 0, 0, 1, 0, 1, 1, 0]);
  const out = k.alloc(6);
  k.matmul(out, x, w, 2); // disabled: not counted
  prof.setEnabled(true);
  const t0 = performance.now();
  k.matmul(out, x, w, 2);
  k.matmul(out, x, w, 2);
  k.add(out, out, out, 6);
  const other = k.alloc(6);
  k.matmulGroup(x, 2, [{ out: other, w }, { out: other, w }]); // keyed by its weights, once
  const total = performance.now() - t0;
  prof.setEnabled(false);
  k.add(out, out, out, 6); // disabled again
  const [got] = k.readBack([{ t: out, offset: 0, length: 6 }]) as Float32Array[];
  // row 0 = w·[1,0,0,1] = [5, 13, 21], row 1 = w·[0,1,1,0] = [5, 13, 21]; doubled twice
  assert.deepEqual([...got!], [20, 52, 84, 20, 52, 84]);
  const r = prof.report(2, total) as { ops: Record<string, { calls_per_step: number; share: number }>; matmul_share: number };
  assert.deepEqual(Object.keys(r.ops).sort(), ['add', 'matmul f32 3x4 m=2', 'matmul {f32 3x4, f32 3x4} m=2']);
  assert.equal(r.ops['matmul {f32 3x4, f32 3x4} m=2']!.calls_per_step, 0.5);
  assert.equal(r.ops['matmul f32 3x4 m=2']!.calls_per_step, 1);
  assert.equal(r.ops['add']!.calls_per_step, 0.5);
  assert.ok(r.matmul_share > 0 && r.matmul_share <= 1.001, `matmul share ${r.matmul_share}`);
});
