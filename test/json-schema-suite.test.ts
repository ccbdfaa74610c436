// The official JSON-Schema-Test-Suite (drafts 7 and 2020-12, vendored under
// test/fixtures/json-schema-test-suite) as the grammar's oracle: for every case whose schema
// compiles, the matcher must accept the valid instance's compact JSON as a complete value and
// reject the invalid one's. Schemas refused (an assertion the grammar cannot enforce, a remote
// $ref) are counted per keyword, not failed. The one documented gap: oneOf is enforced
// exactly where its branches' negations can be expressed (conditionals.ts), else as anyOf, so
// an instance matching two such branches is accepted — counted apart, and checked to be
// exactly that. And formats are asserted (2020-12 makes them annotations by default: its
// "only an annotation" cases are counted apart). Hostnames have no exception: A-labels (xn--…)
// are decided by the IDNA 2008 label check. Prints the per-keyword table docs/api.md reports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { acceptsText } from '../src/constrain/matcher.js';
import { compileSchema, type Schema, SchemaError } from '../src/constrain/schema.js';
import { REPO_ROOT as ROOT } from './paths.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';

registerIdnaHostnames(); // hostnames as the server compiles them (with the A-label check)

const SUITE = join(ROOT, 'test', 'fixtures', 'json-schema-test-suite');

interface Case { description: string; data: unknown; valid: boolean }
interface Group { description: string; schema: unknown; tests: Case[] }
interface Tally { cases: number; refused: number; passed: number; oneOfOverlap: number; formatAsserted: number; failures: string[] }

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.json') ? [join(dir, e.name)] : []));
}

/** Keyword name of a suite file: its base name, `format:NAME` for optional format files. */
function keywordOf(file: string): string {
  const rel = relative(SUITE, file).replace(/\\/g, '/');
  const m = /optional\/format\/(.+)\.json$/.exec(rel);
  if (m) return `format:${m[1]}`;
  const base = rel.split('/').pop()!.replace(/\.json$/, '');
  return rel.includes('/optional/') ? `optional:${base}` : base;
}

/** Does the instance match two or more oneOf branches (each compiled on its own)? */
function matchesSeveralBranches(schema: unknown, text: string, draft: 7 | 2020): boolean {
  const branches = (schema as { oneOf?: unknown[] }).oneOf;
  if (!Array.isArray(branches)) return false;
  let n = 0;
  for (const b of branches) {
    try {
      if (acceptsText(compileSchema(b, 'branch', { draft }), text)) n++;
    } catch {
      return false;
    }
  }
  return n >= 2;
}

export function runSuite(): Map<string, Tally> {
  if (!existsSync(SUITE)) throw new Error(`missing ${SUITE}: the vendored JSON-Schema-Test-Suite`);
  const tallies = new Map<string, Tally>();
  for (const draftDir of ['draft7', 'draft2020-12']) {
    const draft = draftDir === 'draft7' ? 7 : 2020;
    for (const file of files(join(SUITE, draftDir))) {
      const kw = keywordOf(file);
      let t = tallies.get(kw);
      if (!t) tallies.set(kw, (t = { cases: 0, refused: 0, passed: 0, oneOfOverlap: 0, formatAsserted: 0, failures: [] }));
      for (const g of JSON.parse(readFileSync(file, 'utf8')) as Group[]) {
        let compiled: Schema | null = null;
        try {
          compiled = compileSchema(g.schema, 'schema', { draft });
        } catch (e) {
          if (!(e instanceof SchemaError)) throw new Error(`${draftDir}/${kw}: ${g.description}: ${(e as Error).stack}`);
        }
        for (const c of g.tests) {
          t.cases++;
          if (!compiled) {
            t.refused++;
            continue;
          }
          const text = JSON.stringify(c.data);
          const ok = acceptsText(compiled, text);
          if (ok === c.valid) t.passed++;
          else if (ok && kw === 'oneOf' && matchesSeveralBranches(g.schema, text, draft)) t.oneOfOverlap++;
          else if (!ok && c.valid && kw === 'format' && /only an annotation/.test(c.description)) t.formatAsserted++;
          else t.failures.push(`${draftDir} ${kw}: ${g.description} / ${c.description}: ${text} should be ${c.valid ? 'accepted' : 'rejected'}`);
        }
      }
    }
  }
  return tallies;
}

test('JSON-Schema-Test-Suite: every case of a compiled schema is decided as the suite says', () => {
  const tallies = runSuite();
  const rows = [...tallies].sort(([a], [b]) => a.localeCompare(b)).map(([kw, t]) => {
    const run = t.cases - t.refused;
    return { keyword: kw, cases: t.cases, compiled: run, pass: run === 0 ? '—' : `${(100 * t.passed / run).toFixed(1)}%`, oneOfOverlap: t.oneOfOverlap, formatAsserted: t.formatAsserted, fail: t.failures.length };
  });
  console.log(JSON.stringify(rows));
  const failures = [...tallies.values()].flatMap((t) => t.failures);
  assert.deepEqual(failures, []);
  // the keywords this grammar supports compile in the suite
  for (const kw of ['pattern', 'patternProperties', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'allOf', 'anyOf', 'oneOf',
    'additionalProperties', 'dependentRequired', 'dependencies', 'ref', 'anchor', 'items', 'additionalItems', 'propertyNames', 'const', 'enum', 'prefixItems', 'type', 'properties', 'required']) {
    const t = tallies.get(kw);
    assert.ok(t && t.cases - t.refused > 0, `${kw} compiles`);
  }
});
