// src/constrain is a standalone library: no file of it imports from src/server or src/engine
// (type-only imports and re-exports included), and its core does not import the optional IDNA
// module (src/constrain/idna/, registered by the caller) — without it `hostname` admits LDH
// labels only; registered, A-labels whose Punycode is a valid IDNA 2008 label.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { hasLabelCheck } from '../src/constrain/labels.js';
import { acceptsText } from '../src/constrain/matcher.js';
import { compileSchema } from '../src/constrain/schema.js';
import { REPO_ROOT } from './paths.js';

const SRC = join(REPO_ROOT, 'src');
const LIB = join(SRC, 'constrain');

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** The module specifiers a file names: static imports and re-exports (type-only too), side-effect
 * imports and dynamic import() calls. */
function specifiers(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/\b(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"]+)['"]/g)) out.push(m[1]!);
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push(m[1]!);
  return out;
}

/** Repository-relative targets of a file's relative imports (bare and node: ones left out). */
function targets(file: string): string[] {
  return specifiers(file).filter((s) => s.startsWith('.')).map((s) => relative(REPO_ROOT, resolve(dirname(file), s)).replace(/\\/g, '/'));
}

const layerOf = (target: string): string | null => /^src\/(server|engine)\//.exec(target)?.[1] ?? null;

test('src/constrain imports nothing from src/server or src/engine; its core does not import constrain/idna', () => {
  const files = tsFiles(LIB);
  assert.ok(files.length >= 30, `${files.length} files in src/constrain`);
  let seen = 0;
  const bad: string[] = [];
  for (const f of files) {
    const from = relative(REPO_ROOT, f).replace(/\\/g, '/');
    for (const t of targets(f)) {
      seen++;
      if (layerOf(t)) bad.push(`${from} -> ${t}`);
      if (!from.startsWith('src/constrain/idna/') && t.startsWith('src/constrain/idna/')) bad.push(`${from} -> ${t} (the IDNA module is optional)`);
    }
  }
  assert.ok(seen > 100, `${seen} relative imports read`);
  assert.deepEqual(bad, []);
});

test('the import reader sees type-only and multi-line imports (it would catch a server import)', () => {
  // the server's glue around the library does import the server: the reader must see it
  const glue = join(SRC, 'server', 'api', 'structured.ts');
  assert.ok(targets(glue).some((t) => layerOf(t) === 'server'), 'server/api/structured.ts imports server files');
  assert.ok(targets(glue).some((t) => t.startsWith('src/constrain/')), 'and the library');
  const sample = join(LIB, 'constraint.ts');
  assert.ok(specifiers(sample).length === 0, 'constraint.ts imports nothing');
  const engine = join(SRC, 'engine', 'logits-adjust.ts');
  assert.ok(targets(engine).includes('src/constrain/constraint.js'), 'a type-only import is read');
  assert.ok(targets(join(LIB, 'matcher.ts')).includes('src/constrain/frames.js'), 'a multi-line import is read');
});

test('the IDNA hostname check is optional: LDH hostnames without it, checked A-labels once registered', async () => {
  const host = { type: 'string', format: 'hostname' };
  assert.equal(hasLabelCheck(), false, 'nothing registers the check on import');
  const core = compileSchema(host);
  assert.equal(acceptsText(core, '"www.example.com"'), true);
  assert.equal(acceptsText(core, '"xn--bcher-kva.example"'), false, 'the core refuses every A-label');
  const { registerIdnaHostnames } = await import('../src/constrain/idna/index.js');
  registerIdnaHostnames();
  registerIdnaHostnames(); // idempotent
  assert.equal(hasLabelCheck(), true);
  const idna = compileSchema(host);
  assert.equal(acceptsText(idna, '"xn--bcher-kva.example"'), true, 'bücher.example');
  assert.equal(acceptsText(idna, '"xn--abc-.example"'), false, 'Punycode that spells no valid label');
  assert.equal(acceptsText(idna, '"www.example.com"'), true);
  // a grammar compiled before stays as it was compiled
  assert.equal(acceptsText(core, '"xn--bcher-kva.example"'), false);
});
