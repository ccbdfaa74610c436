// The import graph of src/ (type-only imports, re-exports and dynamic imports included):
// no cycle, and imports point down the layer list of DESIGN.md §2 (docs/ARCHITECTURE.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Every relative module a file imports (static, type-only, re-export or dynamic). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [
    ...text.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s*['"](\.[^'"]+)['"]/gms),
    ...text.matchAll(/^\s*import\s*['"](\.[^'"]+)['"]/gm),
    ...text.matchAll(/import\(\s*['"](\.[^'"]+)['"]\s*\)/g),
  ].map((m) => m[1]!);
  return specs.map((spec) => {
    const base = resolve(dirname(file), spec.replace(/\.js$/, ''));
    const candidates = [`${base}.ts`, join(base, 'index.ts')];
    const hit = candidates.find((c) => existsSync(c));
    assert.ok(hit, `${relative(root, file)} imports ${spec}, which resolves to no source file`);
    return hit;
  });
}

const files = sourceFiles(root);
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const rel = (f: string): string => relative(root, f);

/** Strongly connected components with more than one file (Tarjan). */
function cycles(): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next); low.set(v, next); next++;
    stack.push(v); onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); }
      else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do { w = stack.pop()!; onStack.delete(w); scc.push(rel(w)); } while (w !== v);
    if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.sort());
  };
  for (const v of files) if (!index.has(v)) visit(v);
  return found;
}

test('the import graph of src/ has no cycle (type-only imports included)', () => {
  assert.ok(files.length > 100, `found only ${files.length} source files under ${root}`);
  assert.deepEqual(cycles(), []);
});

/** docs/ARCHITECTURE.md "Layers and the direction of imports": a file imports only from its
 * own layer or the ones before it. The frontend needs nothing from the engine (it turns
 * messages into ids), so it sits below it. index.ts is the package entry (any import). */
const LAYERS = ['util', 'kernels', 'checkpoint', 'hub', 'cache', 'tokenizer', 'vision', 'model', 'constrain',
  'frontend', 'engine', 'tools', 'server', 'cli'] as const;

function layerOf(file: string): number {
  const top = rel(file).split('/')[0]!;
  return LAYERS.indexOf(top as (typeof LAYERS)[number]);
}

test('imports point down the layer list (util → … → cli), never up', () => {
  const upward: string[] = [];
  for (const [file, deps] of graph) {
    const from = layerOf(file);
    if (from < 0) continue; // src/index.ts
    for (const dep of deps) {
      const to = layerOf(dep);
      assert.ok(to >= 0 || rel(dep) === 'index.ts', `${rel(dep)} is in no layer of LAYERS`);
      if (to > from) upward.push(`${rel(file)} → ${rel(dep)}`);
    }
  }
  assert.deepEqual(upward, []);
});
