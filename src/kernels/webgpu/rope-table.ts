// The RoPE cos/sin table the webgpu kernels read (uploaded with a step's inputs).

/** cos/sin table [T, rotaryDim/2, 2] for RoPE at `positions`: angle = pos·invFreq[f] in f64
 * (invFreq: θ^(−2f/rotaryDim) by default, or a scaled table such as YaRN's), times the
 * attention factor, rounded once to f32. */
export function ropeTable(positions: ArrayLike<number>, t: number, rotaryDim: number, theta: number,
  invFreq?: ArrayLike<number>, attentionFactor = 1): Float32Array {
  const half = rotaryDim / 2;
  const out = new Float32Array(t * half * 2);
  for (let i = 0; i < t; i++) {
    for (let f = 0; f < half; f++) {
      const angle = positions[i]! * (invFreq ? invFreq[f]! : Math.pow(theta, (-2 * f) / rotaryDim));
      out[(i * half + f) * 2] = Math.cos(angle) * attentionFactor;
      out[(i * half + f) * 2 + 1] = Math.sin(angle) * attentionFactor;
    }
  }
  return out;
}
