// Greedy pick per row under an id mask (Kernels.argmaxRowsMasked): the argmax shader of
// dense.ts with the mask (ids whose bit is clear count as −∞). params: PARAMS.argmax_masked.
import { argmaxShader } from './dense.js';

export const ARGMAX_MASKED = argmaxShader(true);
