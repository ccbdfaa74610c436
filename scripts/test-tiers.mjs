// The one definition of the test tiers. `npm test` runs them in this order and stops after
// the first tier with a failure; `npm run test:fast` runs the first alone.
//
// A test file (test/NAME.test.ts, run as dist/test/NAME.test.js) belongs to the tier whose
// `files` list names it ('*' matches any run of characters). A file no list names belongs to
// the DEFAULT tier ('main'): a new test lands in the middle, neither gating the fast loop
// nor waiting for system programs. `node scripts/run-tests.mjs --check` (and the fast tier's
// test-tiers.test) fails when a file matches two tiers or a pattern matches no file.
//
// concurrency: how many files of the tier run at once, each in its own process. Files of a
// tier must not contend for fixed ports or directories (every server here listens on port 0
// and every scratch directory is a fresh mkdtemp); `alone` files run with nothing beside them
// (whole-machine load tests, tests of wall-clock budgets, files that keep every core busy).
// `alone` and `slowFirst` entries are names or '*' patterns, as in `files`.
// slowFirst: started first (longest-processing-time order), so the tier's last minute is not
// one long file running by itself. Only an ordering hint: a name here that no file has is an
// error of --check like any other stale entry.
// fileEnv: environment variables for some of the tier's files ({ files, env }, files as in
// `files`; a variable the caller already set wins).

/** @typedef {{ files: string[], env: Record<string, string> }} FileEnv */
/** @typedef {{ name: string, what: string, concurrency: number, files: string[], alone?: string[], slowFirst?: string[], fileEnv?: FileEnv[] }} Tier */

/** The lavapipe files' environment. LP_NATIVE_VECTOR_WIDTH=128: lavapipe (llvmpipe) compiles
 * each compute pipeline once, on its first dispatch, with LLVM over 8 invocations a vector
 * (AVX2); with 4 the fully unrolled group kernels a GPU runs (8 columns × 8 blocks of per-lane
 * atomics) compile 2.3–3× faster (a file of them 1.2–2×) and run ~1.4× slower, and a clean
 * machine's shader cache is empty (measured 2026-12-06 on this 2-core VM, an empty cache:
 * webgpu-conv-fold-quant's unit tests 675 → 235 s). DELTASERVE_LAUNCHES=gpu: the engine and
 * kernel suites run the kernels a GPU runs (kernels/webgpu/launches.ts; files whose figures
 * are the cpu profile's pin it), which on lavapipe also cost less to run than the cpu profile
 * at M ≥ 2 — one workgroup per 8 output columns, the conv folded — (2026-12-07, warm cache,
 * 8 wide: webgpu-spec-match 145 → 40 CPU-s, webgpu-dump-logits 127 → 32; 4 wide 58 and 44).
 * One width and one profile for every lavapipe file: one shader cache they all share. Four-wide
 * hides AVX and FMA from the code generator, so a shader's bits may differ from 8-wide's: each
 * file compares two paths bit for bit on one device, compiled alike, and the goldens within
 * their tolerance. A variable the caller set wins (DELTASERVE_LAUNCHES=cpu npm test). */
const LAVAPIPE_ENV = { LP_NATIVE_VECTOR_WIDTH: '128', DELTASERVE_LAUNCHES: 'gpu' };
/** The files that run the webgpu backend on lavapipe (the dry-run bench, gpu-bench-script, keeps
 * the adapter's profile: docs/gpu-bench.md). */
const LAVAPIPE_FILES = ['webgpu-*', 'vision-webgpu'];

/** @type {Tier[]} */
export const TIERS = [
  {
    name: 'fast',
    what: 'unit tests, kernel conformance on ref and wasm, engine invariants on the tiny models',
    concurrency: 2,
    files: [
      // units: no model, or synthetic weights
      'adaptive-k', 'bench-profile', 'chat-injection', 'config', 'dawn-stderr', 'idna', 'json-limits',
      'json-stream', 'log', 'radix-cache', 'request-rules', 'sampler', 'greedy-finish', 'penalty-picks', 'rng-fork', 'readback-pacer', 'candidate-draws', 'sampled-candidates', 'sparse-accept', 'tool-parser', 'tool-stream',
      'tool-template', 'frontend-golden', 'frontend-boundary', 'structured', 'structured-schema', 'json-schema-suite', 'prefix-points', 'pools',
      'scheduler', 'overlap-chain', 'think-mask-run', 'request-ownership', 'memory-plan', 'weights-fit', 'quant-formats', 'tokenizer', 'kernel-commands', 'wgsl-params', 'gpu-access-model', 'gpu-batch-model',
      'test-tiers', 'docs-links', 'docs-performance', 'gpu-bench-report', 'step-timing', 'answer-view', 'structured-conditionals', 'structured-unique', 'constrain-imports', 'import-graph',
      'vision-fixture', 'vision-image', 'vision-kernels', 'vision-mmproj', 'vision-pipeline', 'vision-positions', 'vision-tower',
      'vision-frontend', 'vision-mrope', 'vision-memory', 'checkpoint-layering', 'webui-history',
      // kernel conformance: wasm (and its variants) against the ref twin
      'kernels-conformance', 'kernels-tower-conformance', 'kernels-invariance', 'kernel-boundary', 'sampling-kernels', 'wasm-variant',
      'quant-kernel-families', 'matmul-group', 'pool-storage', 'quantize-wasm',
      // engine invariants on the tiny models
      'golden', 'golden-wasm', 'gdn-chunked', 'engine-invariance', 'spec-parity', 'spec-commit', 'pending-drafts', 'spec-defer-law',
    ],
    slowFirst: ['kernels-conformance', 'golden-wasm', 'engine-invariance', 'spec-parity'],
  },
  {
    name: 'main',
    what: 'the engine, server, CLI and model files end to end on the tiny models (every test file no other tier names)',
    concurrency: 2,
    files: [],
    alone: ['engine-stress', 'prefix-eviction', 'server-admission', 'structured-budget', 'server-fuzz'],
    slowFirst: ['engine-stress', 'prefix-eviction', 'gguf-quant', 'server-fuzz'],
  },
  {
    name: 'system',
    what: 'system programs and whole-product checks: browser, nginx, lavapipe/webgpu, both Node versions, the npm package, the eval baseline, soak',
    // Two at a time, lavapipe files too. Alone, a lavapipe file kept 1.69–1.78 of the 2 cores
    // busy (CI: 544 s of the tier's 626 for 920 CPU-s: its main thread records and waits while
    // lavapipe's threads run, and back); a second file fills those gaps. Measured on this VM
    // under a load of 10–25: the CPU-seconds of a file are the same in a pair as alone
    // (webgpu-sampled-candidates 28.2 vs 28.1–29.3, webgpu-sampled-draws 29.2 vs 28.7–29.4),
    // so lavapipe's threads do not spin when they share the cores. LP_NUM_THREADS=1 (one
    // lavapipe thread each) cost 7–9 % more CPU-seconds: not set.
    concurrency: 2,
    files: [
      'vision-cli', 'vision-webgpu', 'vision-conformance',
      'webui-browser', 'webui-vision', 'replicas', 'webgpu-*', 'node-versions', 'package', 'package-examples', 'eval-baseline',
      'server-soak', 'gpu-bench-script',
    ],
    // its time-boxed steps were sized with nothing beside it
    alone: ['gpu-bench-script'],
    fileEnv: [{ files: LAVAPIPE_FILES, env: LAVAPIPE_ENV }],
    // a clean clone has no recorded times (and an empty shader cache): the longest first, so the
    // last files to run beside nothing are short. The five compile-bound files share many
    // pipelines (a GPU's launches of the same models; llvmpipe's cache keeps what one file
    // compiled for the next, but two files compiling one pipeline at once both pay), so
    // wide-fold, the longest, starts beside qwen35-shape (8-wide: another cache, no pipeline in
    // common) and quant-columns (its quantized column matmuls are wide-fold's engine's) comes
    // last of them. Clean-clone CI, CPU-seconds: CI7 (the compile-bound files in the order
    // gated-norm-fold, conv-fold, wide-fold, conv-fold-quant, quant-columns) 333, 309, 388, 344,
    // 217; CI8 (wide-fold beside quant-columns, then conv-fold-quant, conv-fold, gated-norm-fold)
    // 335, 310, 253, 154, 112; CI9 (this list's order) 396, 149, 186, 89, 109, 147, then
    // 143, 123, 121, 116, and CI7's for the rest: 124, 69, 107, 92, 84, 66, 86, 58, 49, 45, 45,
    // 33, 26, 29, 29, 26, 22. CI11 (every lavapipe file 4 wide on the gpu launch profile): 315,
    // 245, 138, 77, 107, 86, then 49, 93, 66, 38, 90, 208 (qmatmul-norm-fold now compiles the
    // GPU's activation-quantizing variants first), conformance 150, qmatmul-acts-cols-k 88
    slowFirst: ['webgpu-wide-fold', 'webgpu-qwen35-shape', 'webgpu-conv-fold-quant', 'webgpu-conv-fold', 'webgpu-gated-norm-fold', 'webgpu-quant-columns',
      'webgpu-spec-match', 'webgpu-overlap', 'webgpu-device-picks', 'webgpu-dump-logits', 'webgpu-moe',
      'webgpu-qmatmul-norm-fold', 'webgpu-conformance', 'webgpu-pending-drafts', 'webgpu-engine', 'webgpu-overlap-sampled',
      'webgpu-float-columns', 'webgpu-batch-dispatches', 'eval-baseline', 'webgpu-quant-group', 'webgpu-draft-penalty',
      'webgpu-mtp-inputs', 'webgpu-qmatmul-acts-cols-k', 'webgpu-sampled-draws', 'webgpu-sampled-candidates', 'node-versions',
      'package-examples'],
  },
];

export const DEFAULT_TIER = 'main';

/** The environment `tier` gives file `name` (its fileEnv entries that match, in order). */
export function fileEnvOf(tier, name) {
  return Object.assign({}, ...(tier.fileEnv ?? []).filter((e) => e.files.some((p) => matches(p, name))).map((e) => e.env));
}

/** '*' matches any run of characters; everything else is literal. */
export function matches(pattern, name) {
  const re = new RegExp(`^${pattern.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
  return re.test(name);
}

/**
 * Assigns each test name (file name without .test.js) to its tier.
 * @param {string[]} names
 * @param {Tier[]} [tiers]
 * @returns {{ byTier: Map<string, string[]>, errors: string[] }}
 */
export function assignTiers(names, tiers = TIERS) {
  const errors = [];
  const byTier = new Map(tiers.map((t) => [t.name, []]));
  if (!byTier.has(DEFAULT_TIER)) return { byTier, errors: [`the default tier '${DEFAULT_TIER}' is not defined`] };
  for (const name of names) {
    const hits = tiers.filter((t) => t.files.some((p) => matches(p, name)));
    if (hits.length > 1) errors.push(`${name}.test.ts is in ${hits.length} tiers (${hits.map((t) => t.name).join(', ')}): name it in one`);
    byTier.get((hits[0] ?? { name: DEFAULT_TIER }).name).push(name);
  }
  for (const t of tiers) {
    const lists = { files: t.files, alone: t.alone, slowFirst: t.slowFirst, fileEnv: (t.fileEnv ?? []).flatMap((e) => e.files) };
    for (const [list, patterns] of Object.entries(lists)) {
      for (const p of patterns ?? []) {
        if (!names.some((n) => matches(p, n))) errors.push(`tier ${t.name}: ${list} entry '${p}' matches no test file (stale entry in scripts/test-tiers.mjs)`);
        else if (list !== 'files' && !byTier.get(t.name).some((n) => matches(p, n))) errors.push(`tier ${t.name}: ${list} entry '${p}' names a file of another tier`);
      }
    }
  }
  return { byTier, errors };
}
