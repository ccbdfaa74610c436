// Fast tier. The layering of checkpoint reading (docs/ARCHITECTURE.md "Layers and the
// direction of imports"), checked on the static import graph of src/ (import / export …
// from; a dynamic import() is a load on demand, not an edge):
//  - src/checkpoint/ sits below the model and the tokenizer: it reaches only kernels/ and
//    util/;
//  - src/tokenizer/ reaches nothing in src/model/;
//  - the wasm block quantizer is loaded through Kernels.startQuantizer only: neither the
//    load path (checkpoint/, model/) nor the webgpu backend imports it, and the webgpu
//    backend's quantizer, loaded on demand, gives the reference's bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { REPO_ROOT } from './paths.js';
import { refQuantizer } from '../src/kernels/quant/row-quantizer.js';
import { quantRowBytes } from '../src/kernels/quant/formats.js';
import { WasmQuantizer } from '../src/kernels/wasm/quantizer.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { rng } from './numeric.js';

const SRC = join(REPO_ROOT, 'src');

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []);
}

/** src-relative path → the src-relative paths it imports statically. */
function staticImportGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of tsFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    const deps: string[] = [];
    for (const m of text.matchAll(/^\s*(?:import|export)\s(?:[^'"]*?\sfrom\s*)?['"](\.[^'"]+)['"]/gm)) {
      const target = resolve(dirname(file), m[1]!.replace(/\.js$/, '.ts'));
      if (!existsSync(target)) throw new Error(`${relative(SRC, file)} imports ${m[1]}, which is not a file of src/`);
      deps.push(relative(SRC, target));
    }
    graph.set(relative(SRC, file), deps);
  }
  return graph;
}

const graph = staticImportGraph();

/** Every file reachable from `roots` (the roots included). */
function reach(roots: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const stack = [...roots];
  for (let f = stack.pop(); f !== undefined; f = stack.pop()) {
    if (seen.has(f)) continue;
    seen.add(f);
    stack.push(...(graph.get(f) ?? []));
  }
  return seen;
}

/** The import chain root → … → target (for the failure message). */
function chain(roots: readonly string[], target: string): string {
  const parent = new Map<string, string | null>(roots.map((r) => [r, null]));
  const queue = [...roots];
  for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
    if (f === target) break;
    for (const d of graph.get(f) ?? []) if (!parent.has(d)) (parent.set(d, f), queue.push(d));
  }
  const path: string[] = [];
  for (let f: string | null | undefined = target; f; f = parent.get(f)) path.unshift(f);
  return path.join(' → ');
}

const filesIn = (folder: string): string[] => [...graph.keys()].filter((f) => f.startsWith(`${folder}/`));

function assertReachesOnly(roots: readonly string[], allowed: readonly string[], what: string): void {
  assert.ok(roots.length > 0, `${what}: no files`);
  const outside = [...reach(roots)].filter((f) => !allowed.some((a) => f.startsWith(`${a}/`)));
  assert.deepEqual(outside.map((f) => chain(roots, f)), [], `${what} may import only ${allowed.join(', ')}`);
}

test('src/checkpoint imports only kernels/ and util/ (below model/ and tokenizer/)', () => {
  assert.ok(filesIn('checkpoint').includes('checkpoint/safetensors.ts'), 'the graph holds src/checkpoint');
  assertReachesOnly(filesIn('checkpoint'), ['checkpoint', 'kernels', 'util'], 'src/checkpoint');
});

test('src/tokenizer imports nothing from src/model', () => {
  const intoModel = [...reach(filesIn('tokenizer'))].filter((f) => f.startsWith('model/'));
  assert.deepEqual(intoModel.map((f) => chain(filesIn('tokenizer'), f)), []);
});

test('the wasm quantizer is no static import of the load path or the webgpu backend', () => {
  const quantizer = 'kernels/wasm/quantizer.ts';
  assert.ok(graph.has(quantizer));
  assert.ok(reach(['kernels/wasm/backend.ts']).has(quantizer), 'the wasm backend imports its quantizer (the check sees edges)');
  for (const roots of [filesIn('checkpoint'), filesIn('model'), filesIn('kernels/webgpu')]) {
    const reached = reach(roots);
    for (const wasm of [quantizer, 'kernels/wasm/module.ts']) {
      assert.ok(!reached.has(wasm), `static import chain to the wasm module: ${chain(roots, wasm)}`);
    }
  }
});

test('webgpu startQuantizer loads the host quantizer on demand: the reference\'s bytes', async () => {
  // the host quantizer needs no device: called on an instance without one
  const started = await WebGpuBoundaryKernels.prototype.startQuantizer.call(Object.create(WebGpuBoundaryKernels.prototype) as WebGpuBoundaryKernels);
  try {
    assert.ok(started instanceof WasmQuantizer, 'the wasm SIMD quantizer (the build is present)');
    const r = rng(3);
    const rows = 8;
    const cols = 512;
    const x = new Float32Array(rows * cols).map(() => r() - 0.5);
    for (const type of ['q8_0', 'q4_k'] as const) {
      const want = new Uint8Array(rows * quantRowBytes(type, cols));
      const got = new Uint8Array(want.length);
      refQuantizer.quantizeRows(type, x, rows, cols, want);
      started.quantizeRows(type, x, rows, cols, got);
      assert.ok(Buffer.from(got).equals(Buffer.from(want)), `${type} blocks differ`);
    }
  } finally {
    started.dispose();
  }
});
