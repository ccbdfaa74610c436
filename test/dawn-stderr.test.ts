// The CLI's filter of Dawn's native stderr lines (cli/dawn-stderr.ts): Dawn's "Warning: "
// lines are left out wherever the chunks split them; every other byte passes, and a partial
// line that cannot be Dawn's (a progress bar's "\r...") passes before its newline arrives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DawnLineFilter, needsDawnFilter } from '../src/cli/dawn-stderr.js';

const DAWN = 'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.\n';

function filtered(chunks: readonly string[]): { text: string; early: string } {
  let text = '';
  const f = new DawnLineFilter((t) => (text += t));
  chunks.forEach((c) => f.push(c));
  const early = text;
  f.end();
  return { text, early };
}

test('Dawn warning lines are dropped at any chunk split; other output is kept byte for byte', () => {
  const ours = 'deltaserve: memory plan: ...\n{"level":"info","msg":"ready"}\n';
  const all = DAWN + ours.slice(0, 20) + ours.slice(20) + DAWN + 'deltaserve: last line without newline';
  const want = ours + 'deltaserve: last line without newline';
  for (let cut = 0; cut <= all.length; cut += 7) {
    for (const step of [1, 5, 64]) {
      const chunks: string[] = [];
      for (let i = cut; i < all.length; i += step) chunks.push(all.slice(i, i + step));
      assert.equal(filtered([all.slice(0, cut), ...chunks]).text, want, `cut ${cut} step ${step}`);
    }
  }
});

test('a partial line that cannot be Dawn\'s passes at once (progress bars)', () => {
  assert.equal(filtered(['\rbench decode: run 1/3']).early, '\rbench decode: run 1/3');
  assert.equal(filtered(['Warn']).early, '', 'a possible Dawn line waits for its newline');
  assert.equal(filtered(['Warn', 'ing: x']).early, '');
});

test('only engine commands with --kernels webgpu|auto run behind the filter', () => {
  assert.equal(needsDawnFilter(['serve', '--kernels', 'webgpu']), true);
  assert.equal(needsDawnFilter(['bench', '--kernels=auto']), true);
  assert.equal(needsDawnFilter(['serve', '--kernels', 'wasm']), false);
  assert.equal(needsDawnFilter(['serve']), false);
  assert.equal(needsDawnFilter(['serve', '--kernels', 'webgpu', '--help']), false);
  assert.equal(needsDawnFilter(['quantize', '--kernels', 'webgpu']), false);
});

test('the Vulkan loader\'s and Mesa\'s native lines are left out too; our lines that look alike are kept', () => {
  const native = [
    'WARNING: [Loader Message] Code 0 : terminator_CreateInstance: Failed to CreateInstance in ICD 3. Skipping ICD.\n',
    'ERROR: [Loader Message] Code 0 : loader_scanned_icd_add: Could not get \'vkCreateInstance\' via \'vk_icdGetInstanceProcAddr\'\n',
    'MESA: warning: Driver does not support the 0xa7a0 PCI ID.\n',
    'WARNING: lavapipe is not a conformant vulkan implementation, testing use only.\n',
  ];
  const ours = 'deltaserve: warning: the WebGPU adapter "llvmpipe" is a CPU emulation\n{"msg":"Warning: x"}\nWARNING: something else\n';
  const all = native.join('') + ours + DAWN;
  for (const step of [1, 3, 17, 1000]) {
    const chunks: string[] = [];
    for (let i = 0; i < all.length; i += step) chunks.push(all.slice(i, i + step));
    assert.equal(filtered(chunks).text, ours, `step ${step}`);
  }
});

test('chat takes --kernels too: it runs behind the filter', () => {
  assert.equal(needsDawnFilter(['chat', '--kernels', 'webgpu']), true);
  assert.equal(needsDawnFilter(['chat', '--kernels=auto']), true);
  assert.equal(needsDawnFilter(['chat']), false);
});
