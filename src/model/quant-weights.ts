// The bridge from a stored GGML block format to the backend weight dtype it loads as.
// Quantized tensors stay quantized in backend memory (the raw GGML blocks of each row).
import type { WeightDType } from '../kernels/types.js';
import type { QuantType } from '../kernels/quant/formats.js';
import { DeltaserveError } from '../util/errors.js';

export function quantWeightDType(type: QuantType, tensor: string, file: string): WeightDType {
  throw new DeltaserveError('bad_checkpoint',
    `tensor ${tensor} in ${file} is ${type.toUpperCase()}: this build has no kernels for quantized weights`);
}
