// Worker thread of `deltaserve quantize`: encodes bands of f32 rows into GGML blocks
// (quantize-ggml.ts) and sends the bytes back. Messages: {id, type, rows, cols, x} →
// {id, bytes} or {id, error}; buffers are transferred, never copied.
import { parentPort } from 'node:worker_threads';
import type { QuantType } from '../kernels/quant/formats.js';
import { quantRowBytes } from '../kernels/quant/formats.js';
import { quantizeRowsGgml } from '../kernels/quant/quantize-ggml.js';

export interface EncodeJob {
  readonly id: number;
  readonly type: QuantType;
  readonly rows: number;
  readonly cols: number;
  readonly x: Float32Array;
}

parentPort?.on('message', (job: EncodeJob) => {
  try {
    const bytes = new Uint8Array(job.rows * quantRowBytes(job.type, job.cols));
    quantizeRowsGgml(job.type, job.x, job.rows, job.cols, bytes);
    parentPort!.postMessage({ id: job.id, bytes }, [bytes.buffer]);
  } catch (e) {
    parentPort!.postMessage({ id: job.id, error: e instanceof Error ? e.message : String(e) });
  }
});
