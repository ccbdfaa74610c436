// `bench --profile`: wall time per kernel op. The CPU backends' kernels are synchronous
// (a call returns when its pool chunks are done), so timing each call on the main thread
// measures the op itself; matmuls are keyed by weight type and shape (a matmulGroup by the
// list of its weights), so the report says which projection the time goes to. Off by default: the timer calls cost ~0.1 µs each.
import type { AnyKernels } from '../kernels/types.js';

/** Ops timed under their own name, besides matmul (which is keyed by weight). */
const TIMED = new Set([
  'embed', 'rmsNorm', 'gatedRmsNorm', 'rope', 'causalConv', 'causalConvSeqs', 'gdnGates', 'gdnRecurrent', 'gdnRecurrentSeqs', 'gdnRecurrentGatedSeqs', 'gdnChunked', 'kvWrite',
  'attention', 'argmax', 'sample', 'moeRoute', 'moeExperts', 'addSigmoidScaled', 'mulSilu', 'mulSigmoid', 'add',
  'copyRows', 'gatherRows', 'write', 'readBack',
]);

interface OpTime { calls: number; ms: number }

/** Kernels whose calls are timed, and the accumulated times. */
export class KernelProfile {
  readonly kernels: AnyKernels;
  private readonly times = new Map<string, OpTime>();
  private enabled = false;

  constructor(inner: AnyKernels) {
    const record = (key: string, ms: number): void => {
      const t = this.times.get(key);
      if (t) {
        t.calls++;
        t.ms += ms;
      } else this.times.set(key, { calls: 1, ms });
    };
    const enabled = (): boolean => this.enabled;
    this.kernels = new Proxy(inner, {
      get(target, prop, receiver) {
        const v: unknown = Reflect.get(target, prop, receiver);
        if (typeof v !== 'function' || typeof prop !== 'string') return v;
        const fn = v as (...a: unknown[]) => unknown;
        if (prop === 'matmul') {
          return (...a: unknown[]) => {
            if (!enabled()) return fn.apply(target, a);
            const w = a[2] as { dtype: string; rows: number; cols: number };
            const t0 = performance.now();
            const r = fn.apply(target, a);
            record(`matmul ${w.dtype} ${w.rows}x${w.cols} m=${a[3] as number}`, performance.now() - t0);
            return r;
          };
        }
        if (prop === 'matmulGroup') { // keyed by its weights: 'matmul {q4_k 2048x1024, …} m=1'
          return (...a: unknown[]) => {
            if (!enabled()) return fn.apply(target, a);
            const ws = (a[2] as readonly { w: { dtype: string; rows: number; cols: number } }[]).map(({ w }) => `${w.dtype} ${w.rows}x${w.cols}`);
            const t0 = performance.now();
            const r = fn.apply(target, a);
            record(`matmul {${ws.join(', ')}} m=${a[1] as number}`, performance.now() - t0);
            return r;
          };
        }
        if (!TIMED.has(prop)) return fn.bind(target);
        return (...a: unknown[]) => {
          if (!enabled()) return fn.apply(target, a);
          const t0 = performance.now();
          const r = fn.apply(target, a);
          record(prop, performance.now() - t0);
          return r;
        };
      },
    });
  }

  /** Start (or stop) accumulating. */
  setEnabled(on: boolean): void {
    this.enabled = on;
  }

  reset(): void {
    this.times.clear();
  }

  /** Per op: total ms per step (÷ steps), calls per step and share of `totalMs`, largest
   * first; matmuls also summed over all shapes. */
  report(steps: number, totalMs: number): Record<string, unknown> {
    const rows = [...this.times.entries()].sort((a, b) => b[1].ms - a[1].ms);
    const ops: Record<string, { ms_per_step: number; calls_per_step: number; share: number }> = {};
    let matmulMs = 0;
    let timedMs = 0;
    for (const [key, t] of rows) {
      ops[key] = { ms_per_step: round(t.ms / steps), calls_per_step: round(t.calls / steps), share: round(t.ms / totalMs) };
      if (key.startsWith('matmul ')) matmulMs += t.ms;
      timedMs += t.ms;
    }
    return {
      step_ms: round(totalMs / steps),
      matmul_share: round(matmulMs / totalMs),
      untimed_share: round(1 - timedMs / totalMs), // model glue, views, host work
      ops,
    };
  }
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
