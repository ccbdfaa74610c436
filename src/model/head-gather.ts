// The source rows of a head-block permutation (model/layers.ts permuteHeads: a quantized GGUF's
// ssm_out value-head order), built once per (order, M) instead of per layer and step.
//
// Invariants: the rows of (order, m) are i·HV + order[j] at i·HV + j (HV = order.length), the
// same array for the same order object and m while cached — never written after it is built
// (callers and kernels only read it); at most HEAD_ROWS_CACHED arrays per order (the least
// recently used goes first); an order's arrays go with it (a WeakMap keyed by the order).

/** Row counts kept per order: the step shapes a server cycles through (decode, verify, prefill
 * chunk, their batch sizes). */
export const HEAD_ROWS_CACHED = 16;

const byOrder = new WeakMap<Int32Array, Map<number, Int32Array>>();

/** Source row of each [dv] head block of the permuted [M, HV] blocks: i·HV + order[j]. */
export function headGatherRows(order: Int32Array, m: number): Int32Array {
  let cached = byOrder.get(order);
  if (!cached) byOrder.set(order, (cached = new Map()));
  const hit = cached.get(m);
  if (hit) {
    // most recently used last (Map iteration order is insertion order)
    cached.delete(m);
    cached.set(m, hit);
    return hit;
  }
  const rows = buildHeadGatherRows(order, m);
  cached.set(m, rows);
  if (cached.size > HEAD_ROWS_CACHED) cached.delete(cached.keys().next().value!);
  return rows;
}

/** The rows of (order, m), built fresh. */
export function buildHeadGatherRows(order: Int32Array, m: number): Int32Array {
  const hv = order.length;
  const rows = new Int32Array(m * hv);
  for (let i = 0; i < m; i++) for (let j = 0; j < hv; j++) rows[i * hv + j] = i * hv + order[j]!;
  return rows;
}

/** How many arrays are cached for `order` (tests). */
export function headRowsCached(order: Int32Array): number {
  return byOrder.get(order)?.size ?? 0;
}
