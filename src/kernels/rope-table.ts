// The plain RoPE table (no scaling): inverse frequency θ^(−2f/R) of each rotated pair, in
// f64, and scale 1. Scaled tables (linear, YaRN) come from model/rope-scaling.ts.
import type { RopeTable } from './types.js';

export function plainRopeTable(theta: number, rotaryDim: number): RopeTable {
  if (!(rotaryDim > 0 && rotaryDim % 2 === 0)) throw new RangeError(`rope: rotary dim ${rotaryDim} must be even and > 0`);
  const invFreq = new Float64Array(rotaryDim / 2);
  for (let f = 0; f < invFreq.length; f++) invFreq[f] = Math.pow(theta, (-2 * f) / rotaryDim);
  return { invFreq, scale: 1 };
}
