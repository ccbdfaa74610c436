// The pipeline census (docs/testing.md "Where the suite's time goes"): loaded with --import
// in NODE_OPTIONS, it logs every compute pipeline a process compiles (PipelineCache's compile,
// kernels/webgpu/pipelines.ts) when DELTASERVE_PIPELINE_CENSUS names a directory: the WGSL as
// HASH.wgsl, and one line of log.jsonl ({ file, label, hash }) per compile. Nothing else
// changes. `node scripts/shader-compile-bench.mjs --census DIR` then times each source once.
//   DELTASERVE_PIPELINE_CENSUS=/tmp/census NODE_OPTIONS="--import=$PWD/scripts/pipeline-census-hook.mjs" \
//     node scripts/run-tests.mjs webgpu- vision-webgpu
import { appendFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = process.env.DELTASERVE_PIPELINE_CENSUS;
if (dir) {
  const here = new URL('..', import.meta.url).pathname;
  const { PipelineCache } = await import(pathToFileURL(join(here, 'dist/src/kernels/webgpu/pipelines.js')).href);
  const compile = PipelineCache.prototype.compile;
  if (typeof compile !== 'function') throw new Error('pipeline census: PipelineCache has no compile method any more (kernels/webgpu/pipelines.ts): mend scripts/pipeline-census-hook.mjs');
  const file = basename(process.argv[1] ?? 'node');
  PipelineCache.prototype.compile = function (label, code) {
    const hash = createHash('sha1').update(code).digest('hex').slice(0, 16);
    writeFileSync(join(dir, `${hash}.wgsl`), code);
    appendFileSync(join(dir, 'log.jsonl'), `${JSON.stringify({ file, label, hash })}\n`);
    return compile.call(this, label, code);
  };
}
