// What the CLI says about the kernels it runs: `auto` explains its choice in one sentence
// (no nested parentheses of ours), WebGPU on a CPU emulation gets a warning that wasm is
// faster, and the CPU path never loads the optional `webgpu` package (Dawn).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKernels } from '../src/kernels/index.js';
import type { AnyKernels } from '../src/kernels/types.js';
import type { GpuAdapterSummary } from '../src/kernels/webgpu/device.js';
import { emulationWarning, kernelsLine } from '../src/cli/engine-flags.js';
import { REPO_ROOT } from './paths.js';

/** Deepest parenthesis nesting of `s` outside double-quoted strings (a driver's own name,
 * quoted, may carry its own). */
function nesting(s: string): number {
  let depth = 0;
  let max = 0;
  for (const c of s.replace(/"[^"]*"/g, '""')) {
    if (c === '(') max = Math.max(max, ++depth);
    else if (c === ')') depth--;
  }
  return max;
}

function fakeWebGpu(adapter: Partial<GpuAdapterSummary>): AnyKernels {
  return { name: 'webgpu', limits: { adapter } } as unknown as AnyKernels;
}

test('auto explains its choice in one sentence', async () => {
  const k = await createKernels('auto', 1);
  try {
    const line = kernelsLine(k, 'auto');
    assert.match(line, /^(wasm|ref|webgpu)\b.*, chosen by auto: \S/);
    assert.ok(nesting(line) <= 1, `at most one level of parentheses: ${line}`);
    assert.doesNotMatch(line, /\.\s+\S/, 'one sentence');
    if (k.name !== 'webgpu') assert.match(line, /CPU emulation, slower than the wasm kernels|no WebGPU adapter was found|"webgpu" \(Dawn\) is not installed/);
  } finally {
    k.dispose();
  }
});

test('WebGPU on a CPU emulation warns that wasm is faster; a real GPU and the CPU backends do not', async () => {
  const lavapipe = fakeWebGpu({ cpuEmulation: true, description: 'llvmpipe: Mesa 25.0.7 (LLVM 15.0.6)', vendor: 'mesa', device: '' });
  assert.match(emulationWarning(lavapipe) ?? '', /^warning: the WebGPU adapter "llvmpipe: Mesa 25\.0\.7 \(LLVM 15\.0\.6\)" is a CPU emulation, not a GPU: the wasm kernels are many times faster/);
  assert.equal(emulationWarning(fakeWebGpu({ cpuEmulation: false, description: 'NVIDIA H200' })), null);
  const cpu = await createKernels('ref');
  assert.equal(emulationWarning(cpu), null);
  cpu.dispose();
});

/** Module URLs a CLI run resolved (a resolve hook registered through --import). */
function resolvedModules(args: string[]): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'ds-imports-'));
  try {
    const trace = join(dir, 'trace.txt');
    const hooks = `import { appendFileSync } from 'node:fs';
      export async function resolve(s, c, next) { const r = await next(s, c); appendFileSync(${JSON.stringify(trace)}, r.url + '\\n'); return r; }`;
    const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
    const r = spawnSync(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(register)}`,
      join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return readFileSync(trace, 'utf8').trim().split('\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the CPU path never loads the optional webgpu package; --kernels webgpu does (control)', () => {
  const dawn = (urls: string[]): string[] => urls.filter((u) => /\/node_modules\/webgpu\/|\/kernels\/webgpu\/kernels\.js$|\/kernels\/webgpu-node\.js$/.test(u));
  const cpu = resolvedModules(['generate', '--prompt-ids', '5', '--max-tokens', '1', '--json', '--kernels', 'wasm']);
  assert.ok(cpu.some((u) => u.endsWith('/kernels/wasm/index.js')), 'the trace sees the CLI\'s imports');
  assert.deepEqual(dawn(cpu), []);
  const gpu = resolvedModules(['generate', '--prompt-ids', '5', '--max-tokens', '1', '--json', '--kernels', 'webgpu']);
  assert.ok(gpu.some((u) => /\/node_modules\/webgpu\/index\.js$/.test(u)), `webgpu loads when asked for: ${dawn(gpu).join(', ')}`);
});
