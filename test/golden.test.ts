// Invariant 1 (docs/ARCHITECTURE.md "Invariants") on the reference backend (the check lives in golden-check.ts).
import { createRefKernels } from '../src/kernels/ref/index.js';
import { checkGolden } from './golden-check.js';

checkGolden('tiny-think', createRefKernels);
checkGolden('tiny-next-moe', createRefKernels);
