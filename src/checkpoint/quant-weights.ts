// The bridge from a stored GGML block format to the backend weight dtype it loads as.
// Quantized tensors stay quantized in backend memory (the raw GGML blocks of each row).
import type { WeightDType } from '../kernels/types.js';
import type { QuantType } from '../kernels/quant/formats.js';

export function quantWeightDType(type: QuantType, _tensor: string, _file: string): WeightDType {
  return type;
}
