// Entry point of the kernel module (build/kernels.wasm). Memory is imported and shared:
// every worker thread instantiates this module on the same WebAssembly.Memory. The JS side
// (src/kernels/wasm) owns allocation; nothing here allocates. Static data (math tables)
// ends at heapBase(); the JS allocator starts above it.
export { matmulBf16, matmulF32, packPanels, panelTmpBytes, streamRead } from './matmul';
export { matmulF16 } from './matmulf16';
export { rmsNorm, gatedRmsNorm, rope, mulSilu, mulSigmoid, add, gdnGates, moeRoute, argmax } from './dense';
export { attention, attentionTmpBytes } from './attention';
export { causalConv, causalConvSeqs, gdnRecurrent, gdnRecurrentSeqs } from './gdn';
export { gdnChunked, chunkedTmpBytes } from './chunked';
export { quantizeActs, qmatmul, qmatmulTmpBytes } from './qmatmul';
export { matmulGroup } from './matmulgroup';
export { repackQ8x4, interleaveActs4 } from './q8x4';
export { repackQ4kx4, interleaveQ4kx4Acts } from './q4kx4';
export { repackQ6kx4, q6kx4ActSums } from './q6kx4';
export { repackQ32x4 } from './q32x4';
export { repackQ5kx4 } from './q5kx4';
export { repackQ8u4 } from './q8u4';

export function heapBase(): usize {
  return __heap_base;
}
export { sampleRows, sampleTmpBytes } from './sampling';
export { quantizeBlocks, quantizeTmpBytes } from './quantize';
export { layerNorm, biasAct } from './tower';
