// Invariant 1 (docs/ARCHITECTURE.md "Invariants") on GGUF files: tiny-think-BF16.gguf (llama.cpp's converter, same
// BF16 weights as ../shared/models/tiny-think) matches the golden logits, state norm, MTP
// top-10 and greedy ids as tightly as the safetensors checkpoint does (gguf-twin.test.ts
// shows it gives bit-identical logits to it, so the ref backend needs no second golden run).
import { after, describe } from 'node:test';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { checkGolden } from './golden-check.js';
import { sharedPath } from './paths.js';

const BF16 = (): string => sharedPath('models', 'gguf', 'tiny-think-BF16.gguf');
const wasm = await createWasmKernels({ threads: 2 });
after(() => wasm.dispose());

describe('tiny-think-BF16.gguf, wasm threads=2', () => checkGolden('tiny-think', () => wasm, BF16));
