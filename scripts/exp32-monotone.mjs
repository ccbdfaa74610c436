// Checks that the reference sampler's exp32 (kernels/ref/sampling.ts) is monotone
// non-decreasing over every f32 y in [-87, 0] (below -87 it returns 0): the certificate of
// the candidate read-back (engine/sampled-candidates.ts) relies on it. Walks every f32 from
// -0 down to -87 (~1.1e9 values) and prints JSON: the number checked and every inversion
// (a y whose exp32 exceeds that of the next larger f32). Needs dist/ (npx tsc). Minutes.
// Usage: node scripts/exp32-monotone.mjs [fromBits toBits] (a sub-range, for a quick check)
import { exp32 } from '../dist/src/kernels/ref/sampling.js';

const f = new Float32Array(1);
const u = new Uint32Array(f.buffer);
const lo = process.argv[2] ? Number(process.argv[2]) : 0x80000000; // -0
f[0] = -87;
const hi = process.argv[3] ? Number(process.argv[3]) : u[0];
let prev = Infinity;
let prevY = NaN;
const inversions = [];
const t0 = Date.now();
for (let b = lo; b <= hi; b++) {
  u[0] = b;
  const y = f[0];
  const e = exp32(y);
  // y decreases as b grows: exp32 must not grow
  if (e > prev && inversions.length < 100) inversions.push({ y, e, largerY: prevY, eAtLargerY: prev });
  prev = e;
  prevY = y;
}
console.log(JSON.stringify({ checked: hi - lo + 1, from: -0, to: -87, monotone: inversions.length === 0, inversions, seconds: (Date.now() - t0) / 1000 }));
