// A pool of worker threads that quantize bands of rows for `deltaserve quantize`, so every
// core works on the k-quant searches. Results come back as promises; the caller keeps
// them in order (each band's bytes are independent of the others').
import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import type { QuantType } from '../kernels/quant/formats.js';

interface Pending {
  resolve: (b: Uint8Array) => void;
  reject: (e: Error) => void;
}

export class EncodePool {
  private readonly workers: Worker[];
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private turn = 0;

  constructor(readonly size: number = availableParallelism()) {
    const url = new URL('./encode-worker.js', import.meta.url);
    this.workers = Array.from({ length: Math.max(1, size) }, () => {
      const w = new Worker(url);
      w.on('message', (m: { id: number; bytes?: Uint8Array; error?: string }) => {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if (m.bytes) p.resolve(m.bytes);
        else p.reject(new Error(m.error ?? 'encode worker failed'));
      });
      w.on('error', (e) => this.failAll(e));
      return w;
    });
  }

  /** Quantize `rows` rows of `cols` values (x is transferred to the worker). */
  encode(type: QuantType, x: Float32Array, rows: number, cols: number): Promise<Uint8Array> {
    const id = this.nextId++;
    const w = this.workers[this.turn++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      w.postMessage({ id, type, rows, cols, x }, [x.buffer as ArrayBuffer]);
    });
  }

  private failAll(e: Error): void {
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
