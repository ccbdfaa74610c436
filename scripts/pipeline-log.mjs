// An --import hook that logs every compute pipeline the webgpu backend compiles, for
// scripts/shader-compile-cost.mjs (which pipelines a test run makes lavapipe compile, and what
// each costs). With PIPELINE_LOG_DIR set, each compile appends "HASH FILE KEY" to
// $PIPELINE_LOG_DIR/pipelines.log (HASH: sha1 of the WGSL source, 12 hex digits; FILE: the test
// file under scripts/run-tests.mjs, else the script) and writes the source once to
// $PIPELINE_LOG_DIR/src/HASH.wgsl. Without it, nothing is patched.
//   PIPELINE_LOG_DIR=/tmp/pl NODE_OPTIONS=--import=./scripts/pipeline-log.mjs npm test -- webgpu-
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename, join } from 'node:path';

const dir = process.env.PIPELINE_LOG_DIR;
if (dir) {
  const { PipelineCache } = await import('../dist/src/kernels/webgpu/pipelines.js');
  mkdirSync(join(dir, 'src'), { recursive: true });
  // run-tests.mjs names each file's CPU log after the file
  const file = process.env.RUN_TESTS_CPU_LOG ? basename(process.env.RUN_TESTS_CPU_LOG, '.txt') : basename(process.argv[1] ?? 'node');
  const compile = PipelineCache.prototype.compile;
  if (typeof compile !== 'function') throw new Error('pipeline-log.mjs: PipelineCache.compile(label, code) is gone (src/kernels/webgpu/pipelines.ts): update the hook');
  PipelineCache.prototype.compile = function logged(label, code) {
    const hash = createHash('sha1').update(code).digest('hex').slice(0, 12);
    appendFileSync(join(dir, 'pipelines.log'), `${hash} ${file} ${label}\n`);
    const src = join(dir, 'src', `${hash}.wgsl`);
    if (!existsSync(src)) writeFileSync(src, code);
    return compile.call(this, label, code);
  };
}
