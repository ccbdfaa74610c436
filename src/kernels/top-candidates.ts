// Kernels.topCandidates for host-memory rows (ref and wasm: one implementation, the
// definition the webgpu shader wgsl/top-candidates.ts matches bit for bit).
// Per row i of x (x[i·stride .. i·stride + n)): the set of the first min(c, #non-NaN) ids in
// the order (key desc, id asc), key = the f32's total-order key (orderKey: −0 just below +0,
// otherwise the numeric order); NaN ids are never in it. Written in ascending id order at
// [outOffset + i·c, + c): ids, and the values as copied bits; the slots after the set hold
// id −1 and −∞. Every id outside the set is NaN or holds a value ≤ the set's smallest
// (the property the exact sampled finish builds on, engine/sampled-candidates.ts).

/** The unsigned order key of an f32's bits b (NaN: callers skip it): a > b as keys ⟺ a > b as
 * numbers, except +0 > −0. */
export function orderKey(b: number): number {
  return (b & 0x80000000) !== 0 ? ~b >>> 0 : (b | 0x80000000) >>> 0;
}

/** Row r's set: ids (ascending) of its top c by (key desc, id asc). The scan compares f32
 * values (a value below the current c-th is out, NaN too); only an equal value (the same
 * bits, or −0 against +0) compares keys. */
function topOfRow(x: Float32Array, bits: Uint32Array, base: number, n: number, c: number): number[] {
  // the current top, best first: [key, id] pairs; a later id with an equal key never enters
  const keys: number[] = [];
  const ids: number[] = [];
  let tv = NaN; // the c-th value once the top is full
  for (let i = 0; i < n; i++) {
    const v = x[base + i]!;
    if (keys.length === c) {
      if (!(v >= tv)) continue; // below the c-th, or NaN
      if (v === tv && !(orderKey(bits[base + i]!) > keys[c - 1]!)) continue;
    } else if (v !== v) continue;
    const k = orderKey(bits[base + i]!);
    if (keys.length === c) { keys.pop(); ids.pop(); }
    let j = keys.length;
    while (j > 0 && keys[j - 1]! < k) j--;
    keys.splice(j, 0, k);
    ids.splice(j, 0, i);
    if (keys.length === c) tv = x[base + ids[c - 1]!]!;
  }
  return ids.sort((a, b) => a - b);
}

/** topCandidates over host rows (see the header): ids and vals [outOffset + i·c, + c) for
 * i < m. */
export function topCandidates(ids: Int32Array, vals: Float32Array, outOffset: number, x: Float32Array, m: number, n: number, stride: number,
  c: number): void {
  if (!(Number.isInteger(c) && c >= 1)) throw new RangeError(`topCandidates: c = ${c} must be an integer ≥ 1`);
  if (m <= 0) return;
  if (n > stride || (m - 1) * stride + n > x.length) throw new RangeError(`topCandidates: ${m} rows of ${n} (stride ${stride}) past the logits`);
  if (outOffset < 0 || outOffset + m * c > ids.length || outOffset + m * c > vals.length) {
    throw new RangeError(`topCandidates: ${m} rows of ${c} candidates at ${outOffset} past the outputs`);
  }
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const outBits = new Uint32Array(vals.buffer, vals.byteOffset, vals.length);
  for (let r = 0; r < m; r++) {
    const set = topOfRow(x, bits, r * stride, n, c);
    const o = outOffset + r * c;
    for (let j = 0; j < c; j++) {
      const id = set[j];
      ids[o + j] = id ?? -1;
      outBits[o + j] = id === undefined ? 0xff800000 : bits[r * stride + id]!;
    }
  }
}

