#!/usr/bin/env node
// Declared coverage of JSON Schema corpora: the fraction of schemas the server compiles
// without a 400 (the path a request's response_format takes: compileOrThrow, strict, with the
// server's compile budget), per category, as one JSON object on stdout. No assertions.
//
//   node scripts/schema-coverage.mjs DIR [--sample N] [--seed S] [--grammar-units N] [--reasons K] [--files]
//
// DIR holds JSONSchemaBench's layout: one sub-directory per category of *.json schemas (the
// repository's data/), or a flat directory of `Category---name.json` files each holding
// {schema, tests} (its maskbench/data/). With tests, every compiled schema's instances are
// also checked against the matcher: a valid instance (compact JSON) must be accepted as a
// complete value, an invalid one rejected; the counts are reported per category (`tests`),
// with the first disagreements (`--files` lists every refused file with its reason).
// --sample N takes a seeded sample of N schemas from the whole corpus (default: all).
// Requires `npx tsc -p tsconfig.json` first (it reads dist/).
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';
import { readdirSync, readFileSync, statSync } from 'node:fs';

const repo = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const dist = resolve(repo, process.env.DELTASERVE_DIST ?? 'dist');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    sample: { type: 'string' }, seed: { type: 'string', default: '48' }, 'grammar-units': { type: 'string' },
    reasons: { type: 'string', default: '40' }, files: { type: 'boolean', default: false },
  },
});
if (positionals.length !== 1) {
  console.error('usage: node scripts/schema-coverage.mjs DIR [--sample N] [--seed S] [--grammar-units N] [--reasons K] [--files]');
  process.exit(2);
}
const imp = (p) => import(resolve(dist, 'src', p));
const request = await imp('server/structured/request.js');
const { acceptsText } = await imp('constrain/matcher.js');
if (values['grammar-units'] !== undefined) request.setGrammarBudget(Number(values['grammar-units'])); // default: the server's --max-grammar-units

/** Every schema of the corpus: {category, file, schema, tests}. */
function corpus(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      for (const f of readdirSync(p).sort()) if (f.endsWith('.json')) out.push({ category: e.name, file: join(e.name, f), path: join(p, f) });
    } else if (e.name.endsWith('.json') && statSync(p).isFile()) {
      const m = /^(.+?)---(.+)$/.exec(e.name);
      out.push({ category: m ? m[1] : '(top)', file: e.name, path: p });
    }
  }
  return out;
}

/** A seeded shuffle's first n (mulberry32). */
function sample(xs, n, seed) {
  let a = seed >>> 0;
  const rnd = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const ys = [...xs];
  for (let i = ys.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [ys[i], ys[j]] = [ys[j], ys[i]];
  }
  return ys.slice(0, n).sort((x, y) => x.file.localeCompare(y.file));
}

/** A refusal's reason without its JSON pointer and literal values (so reasons count up). */
function reasonOf(message) {
  const kw = /the keyword "([^"]+)" \(([^)]*)\)/.exec(message);
  if (kw) return `keyword ${kw[1]} (${kw[2]})`;
  const m = message.replace(/^invalid JSON schema: /, '').replace(/^schema[^\s:]*:? (?=its )/, '').replace(/^schema\S*\.\$ref /, '$ref ');
  return m
    .replace(/^[^\s:]*(?:\.[^\s:]*)*: /, '')
    .replace(/"(?:[^"\\]|\\.)*"/g, '"…"')
    .replace(/\/(?:[^/\\]|\\.)+\/[a-z]*/g, '/…/')
    .replace(/\b\d+(?:\.\d+)?\b/g, 'N')
    .slice(0, 160);
}

const all = corpus(resolve(positionals[0]));
const picked = values.sample ? sample(all, Number(values.sample), Number(values.seed)) : all;
const cats = new Map();
const reasons = new Map();
const refusedFiles = [];
const disagreements = [];
const t0 = performance.now();
for (const item of picked) {
  let c = cats.get(item.category);
  if (!c) cats.set(item.category, (c = { compiled: 0, total: 0, tests: { valid: 0, validAccepted: 0, invalid: 0, invalidRejected: 0 } }));
  c.total++;
  let doc;
  try {
    doc = JSON.parse(readFileSync(item.path, 'utf8'));
  } catch (e) {
    const r = `unreadable file: ${e.message.slice(0, 60)}`;
    reasons.set(r, (reasons.get(r) ?? 0) + 1);
    continue;
  }
  const wrapped = doc && typeof doc === 'object' && 'schema' in doc && Array.isArray(doc.tests);
  const schema = wrapped ? doc.schema : doc;
  let compiled;
  try {
    compiled = request.compileOrThrow(schema, 'schema');
  } catch (e) {
    if (typeof e?.status === 'number' ? e.status !== 400 : !/invalid JSON schema/.test(e?.message ?? '')) throw e;
    const r = reasonOf(e.message);
    reasons.set(r, (reasons.get(r) ?? 0) + 1);
    refusedFiles.push({ file: item.file, reason: e.message.slice(0, 300) });
    continue;
  }
  c.compiled++;
  if (!wrapped) continue;
  for (const t of doc.tests) {
    const ok = acceptsText(compiled, JSON.stringify(t.data));
    if (t.valid) {
      c.tests.valid++;
      if (ok) c.tests.validAccepted++;
    } else {
      c.tests.invalid++;
      if (!ok) c.tests.invalidRejected++;
    }
    if (ok !== t.valid && disagreements.length < 30) disagreements.push({ file: item.file, valid: t.valid, data: JSON.stringify(t.data).slice(0, 200) });
  }
}
const round = (x) => +x.toFixed(4);
const categories = Object.fromEntries([...cats].sort(([a], [b]) => a.localeCompare(b)).map(([k, c]) => [k, {
  compiled: c.compiled, total: c.total, coverage: round(c.compiled / c.total), ...(c.tests.valid + c.tests.invalid > 0 ? { tests: c.tests } : {}),
}]));
const compiled = [...cats.values()].reduce((s, c) => s + c.compiled, 0);
console.log(JSON.stringify({
  corpus: resolve(positionals[0]), sample: values.sample ? { n: picked.length, seed: Number(values.seed) } : null,
  node: process.version, seconds: round((performance.now() - t0) / 1000),
  total: { compiled, total: picked.length, coverage: round(compiled / picked.length) },
  categories,
  reasons: Object.fromEntries([...reasons].sort((a, b) => b[1] - a[1]).slice(0, Number(values.reasons))),
  ...(disagreements.length > 0 ? { disagreements } : {}),
  ...(values.files ? { refused: refusedFiles } : {}),
}, null, 1));
