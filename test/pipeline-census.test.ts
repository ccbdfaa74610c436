// The pipeline census hook (scripts/pipeline-census-hook.mjs, docs/testing.md "Where the
// suite's time goes"): in a process started with it, every pipeline PipelineCache compiles is
// logged once (its source as HASH.wgsl, a log.jsonl line naming the file and the label), a
// cached bind logs nothing, an alias variant is a compile of its own, and the pipeline is the
// device's as without the hook.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './paths.js';

const CODE = `@group(0) @binding(1) var<storage, read_write> A: array<f32>;
@group(0) @binding(2) var<storage, read_write> B: array<f32>;
@compute @workgroup_size(1) fn main() { A[0] = B[0]; }`;

// a device that records what it was asked to create
const CHILD = `
const { PipelineCache } = await import(${JSON.stringify(pathToFileURL(join(REPO_ROOT, 'dist/src/kernels/webgpu/pipelines.js')).href)});
const made = [];
const device = {
  createBindGroupLayout: (d) => ({ layout: d.label }),
  createShaderModule: (d) => ({ module: d.code }),
  createPipelineLayout: () => ({}),
  createComputePipeline: (d) => { made.push(d.label); return { pipeline: d.label }; },
};
const cache = new PipelineCache(device);
const [a, b] = [{}, {}];
const first = cache.bind('copy_1', () => ${JSON.stringify(CODE)}, [a, b]);
cache.bind('copy_1', () => { throw new Error('a cached bind builds no source'); }, [a, b]);
cache.bind('copy_1', () => ${JSON.stringify(CODE)}, [a, a]);
console.log(JSON.stringify({ made, first: first.pipeline.pipeline }));`;

test('the census hook logs each compiled pipeline once, with its source, and changes nothing else', () => {
  const dir = mkdtempSync(join(tmpdir(), 'census-'));
  try {
    const hook = pathToFileURL(join(REPO_ROOT, 'scripts', 'pipeline-census-hook.mjs')).href;
    const r = spawnSync(process.execPath, [`--import=${hook}`, '--input-type=module', '-e', CHILD],
      { encoding: 'utf8', env: { ...process.env, DELTASERVE_PIPELINE_CENSUS: dir } });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { made: string[]; first: string };
    assert.deepEqual(out.made, ['copy_1', 'copy_1|-1,0'], 'the device made the plain and the alias pipeline, once each');
    assert.equal(out.first, 'copy_1');
    const log = readFileSync(join(dir, 'log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { file: string; label: string; hash: string });
    assert.deepEqual(log.map((l) => l.label), ['copy_1', 'copy_1|-1,0']);
    assert.ok(log.every((l) => l.file === 'node'), `a process with no script file is logged as node: ${JSON.stringify(log)}`);
    const sources = readdirSync(dir).filter((f) => f.endsWith('.wgsl')).sort();
    assert.deepEqual(sources, [...new Set(log.map((l) => `${l.hash}.wgsl`))].sort(), 'one source file per logged hash');
    assert.equal(readFileSync(join(dir, `${log[0]!.hash}.wgsl`), 'utf8'), CODE);
    assert.notEqual(log[0]!.hash, log[1]!.hash, 'the alias variant is another source (B folded into A)');
    // without the variable the hook does nothing
    const off = spawnSync(process.execPath, [`--import=${hook}`, '--input-type=module', '-e', CHILD],
      { encoding: 'utf8', env: { ...process.env, DELTASERVE_PIPELINE_CENSUS: '' } });
    assert.equal(off.status, 0, off.stderr);
    assert.equal(readFileSync(join(dir, 'log.jsonl'), 'utf8').trim().split('\n').length, 2, 'nothing logged without DELTASERVE_PIPELINE_CENSUS');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
