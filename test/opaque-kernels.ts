// Test backends for the kernel boundary. `opaqueKernels` wraps a CPU backend so that its
// tensors are opaque handles (only `length` visible, like a GPU buffer region): any
// JS-side array work on a tensor above kernels/ fails at once. `asyncReadBack` wraps a
// backend so that readBack answers with a promise (as a GPU backend's does).
import type { AnyKernels, Kernels, Tensor } from '../src/kernels/types.js';

/** An opaque tensor: its elements live in a private map. */
export class Handle implements Tensor {
  constructor(readonly length: number) {}
}

const memory = new WeakMap<Handle, Float32Array | Int32Array>();

function wrap(a: Float32Array | Int32Array): Handle {
  const h = new Handle(a.length);
  memory.set(h, a);
  return h;
}

/** Handles (at any depth of plain objects and arrays) replaced by their arrays. */
function unwrap(v: unknown): unknown {
  if (v instanceof Handle) {
    const a = memory.get(v);
    if (!a) throw new Error('unknown handle');
    return a;
  }
  if (Array.isArray(v)) return v.some((x) => typeof x === 'object' && x !== null) ? v.map(unwrap) : v;
  if (typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([key, x]) => [key, unwrap(x)]));
  }
  return v;
}

const WRAPS = new Set(['alloc', 'allocI32', 'view']);

export function opaqueKernels(inner: Kernels): Kernels<Handle, Handle> {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        const out = (v as (...a: unknown[]) => unknown).apply(target, args.map(unwrap));
        return WRAPS.has(String(prop)) ? wrap(out as Float32Array) : out;
      };
    },
  }) as unknown as Kernels<Handle, Handle>;
}

/** `inner` with readBack answering through a promise (a microtask later). */
export function asyncReadBack(inner: AnyKernels): AnyKernels {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'readBack') {
        return (...args: unknown[]) => Promise.resolve().then(() => (v as (...a: unknown[]) => unknown).apply(target, args));
      }
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
