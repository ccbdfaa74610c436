// How the wasm backend cuts one attention call into units (assembly/attention.ts): query
// tokens per unit and query heads per unit. A choice of blocking, never of results: every
// row keeps its own chain, so any blocking gives the same bits.

const ATTN_QB = 8; // query tokens per attention unit, at most
const ATTN_SCORES = 1 << 21; // f32 scores per thread's attention scratch, at most

/** Query tokens per attention unit (qb) and query heads per unit (per, dividing nH/nKV) for
 * T queries over up to n keys. A unit reads each K and V row once for its qb·per rows, so
 * large blocks cut cache traffic; smaller ones make enough units for the threads. Results
 * never depend on the choice (assembly/attention.ts: per-row chains). Scores scratch
 * qb·per·n floats per thread stays ≤ ATTN_SCORES. */
export function attentionBlocking(t: number, n: number, nH: number, nKV: number, threads: number): { per: number; qb: number } {
  const group = nH / nKV;
  if (t === 1) return { per: decodeHeadsPerUnit(group, nKV, threads), qb: 1 };
  let qb = Math.max(1, Math.min(ATTN_QB, t, Math.floor(ATTN_SCORES / (group * n))));
  // halve the blocks only while some thread would have no unit: each halving reads the
  // cache once more per KV head (Intel Xeon, 2 threads, T = 4 verify, 8 heads / 2 KV heads:
  // one block per KV head against blocks of 1 (the old floor of 4 units per thread) 687
  // against 1076 µs at 1024 keys, 1345 against 2068 at 2048)
  while (qb > 1 && Math.ceil(t / qb) * nKV < threads) qb = Math.ceil(qb / 2);
  return { per: group, qb };
}

/** Query heads per decode unit: the whole GQA group (each K and V row read once for all its
 * heads) unless that leaves threads idle, then the largest divisor of the group that gives
 * every thread a unit. Intel Xeon (2 vCPUs), qwen3.5-0.8b shape (8 heads, 2 KV heads,
 * hd 256), one decode query: whole groups against single heads 20 against 28 µs at 80 keys,
 * 243 against 645 µs at 1023 keys (2 threads); 458 against 1105 µs on one thread. */
export function decodeHeadsPerUnit(group: number, nKV: number, threads: number): number {
  for (let per = group; per > 1; per--) {
    if (group % per === 0 && nKV * (group / per) >= threads) return per;
  }
  return 1;
}
