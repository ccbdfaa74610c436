// `bench --mode grammar --schema FILE`: mask cost on the caller's schemas (e.g. the MCP
// ClientRequest union in test/bench/), as a model writing under them meets it. A seeded
// stand-in for the model walks each schema: at every step it takes the constraint's mask
// (timed) and picks uniformly among the allowed tokens of at most 3 bytes (short tokens, as
// text mostly is), ending when the stop id is allowed with probability 0.3. "Cold": one
// fresh mask cache per schema across its walks (a server's first requests); "warm": the same
// walks again (later requests meeting states the cache holds).
import { readFileSync } from 'node:fs';
import { MaskCache, type TokenVocab } from '../constrain/mask.js';
import { GrammarMatcher } from '../constrain/grammar-matcher.js';
import { val } from '../constrain/matcher.js';
import { compileSchema } from '../constrain/schema.js';
import { DeltaserveError } from '../util/errors.js';
import { Rng } from '../util/rng.js';

/** A schema file: a JSON Schema, or a JSONSchemaBench entry {schema, tests}. */
function loadSchema(file: string): unknown {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new DeltaserveError('bad_request', `--schema ${file}: ${(e as Error).message}`);
  }
  const o = doc as Record<string, unknown>;
  return typeof o === 'object' && o !== null && 'schema' in o && 'tests' in o ? o['schema'] : doc;
}

const quantiles = (xs: readonly number[]): { mean: number; p50: number; p99: number; max: number } => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => +s[Math.min(s.length - 1, Math.floor(p * s.length))]!.toFixed(3);
  return { mean: +(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3), p50: q(0.5), p99: q(0.99), max: q(1) };
};

function allowedIds(mask: Uint32Array): number[] {
  const out: number[] = [];
  for (let w = 0; w < mask.length; w++) {
    const bits = mask[w]!;
    if (bits === 0) continue;
    for (let b = 0; b < 32; b++) if ((bits >>> b) & 1) out.push(w * 32 + b);
  }
  return out;
}

/** Mask times per schema file along `walks` walks of at most `tokens` tokens each; with
 * `decodeMs` (a decode step of the model), their ratio to it too. */
export function schemaMaskTimes(v: TokenVocab, files: readonly string[], walks: number, tokens: number, decodeMs: number | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const stops = new Set(v.stopIds);
  for (const file of files) {
    const t0 = performance.now();
    const start = [val(compileSchema(loadSchema(file), 'schema', { lenient: true }), null)];
    const compileMs = performance.now() - t0;
    const cache = new MaskCache();
    const cold: number[] = [];
    const docs: number[][] = [];
    for (let w = 0; w < walks; w++) {
      const rng = new Rng(w);
      const m = GrammarMatcher.start(v, start, cache);
      const ids: number[] = [];
      for (let k = 0; k < tokens; k++) {
        const t = performance.now();
        if (k > 0) m.advance(ids[k - 1]!);
        const allowed = allowedIds(m.mask());
        cold.push(performance.now() - t);
        if (allowed.some((id) => stops.has(id)) && rng.next() < 0.3) break;
        const text = allowed.filter((id) => !stops.has(id));
        const short = text.filter((id) => v.bytesOf[id]!.length <= 3);
        const pool = short.length > 0 ? short : text;
        if (pool.length === 0) break;
        ids.push(pool[Math.floor(rng.next() * pool.length)]!);
      }
      docs.push(ids);
    }
    // the same walks again: a later request meeting states the cache has seen
    const warm: number[] = [];
    for (const ids of docs) {
      const m = GrammarMatcher.start(v, start, cache);
      for (let k = 0; k <= ids.length; k++) {
        const t = performance.now();
        if (k > 0) m.advance(ids[k - 1]!);
        m.mask();
        warm.push(performance.now() - t);
      }
    }
    const ratios = (q: { mean: number; p99: number }): Record<string, number> =>
      decodeMs === null ? {} : { mean_ratio: +(q.mean / decodeMs).toFixed(4), p99_ratio: +(q.p99 / decodeMs).toFixed(4) };
    const qc = quantiles(cold);
    const qw = quantiles(warm);
    out[file] = {
      compile_ms: +compileMs.toFixed(1), masks: cold.length, ...(decodeMs !== null ? { decode_step_ms: decodeMs } : {}),
      mask_ms_cold: { ...qc, ...ratios(qc) }, mask_ms_warm: { ...qw, ...ratios(qw) },
    };
  }
  return out;
}
