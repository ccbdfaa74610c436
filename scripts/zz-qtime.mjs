const dist = process.argv[2];
const { gpuUnderTest, run } = await import(`${dist}/test/webgpu-helpers.js`);
const { createRefKernels } = await import(`${dist}/src/kernels/ref/index.js`);
const { randomScaleMatrix } = await import(`${dist}/test/quant-blocks.js`);
const ref = createRefKernels();
const g = await gpuUnderTest();
for (const spec of process.argv.slice(3)) {
  const [type, ms] = spec.split(':');
  const k = 2304, n = 13, m = Number(ms ?? 1);
  const { weight, bytes } = ref.allocWeight(type, n, k);
  bytes.set(randomScaleMatrix(type, n, k, 5));
  const gw = g.uploadWeight(weight);
  const x = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i));
  for (let rep = 0; rep < 2; rep++) {
    const out = g.alloc.upload(new Float32Array(m * n));
    const t0 = performance.now();
    await run(g, (e) => g.matmul(e, out, g.alloc.upload(x), gw, m), out);
    console.log(type, 'M', m, 'rep', rep, (performance.now() - t0).toFixed(0), 'ms');
  }
}
g.dispose();
process.exit(0);
