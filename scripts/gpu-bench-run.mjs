// scripts/gpu-bench.sh's body, on the Node it brought: diagnostics first (nvidia-smi, the
// Vulkan loader and ICD, the adapter Dawn picks: ONE line on stdout, loud when the run is
// useless), then every step in its own time box with OUT/gpu-bench.json rewritten after each,
// so a run cut short still brings back everything done and the error text of what failed.
// Usage: node gpu-bench-run.mjs --mode full|dry --app DIR --out DIR --work DIR
//          [--budget SECONDS] [--shapes a,b] [--only REGEX] [--loader-dir DIR] [--allow-cpu-adapter]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { gpuBandwidth, summarize, verdict } from './gpu-bench-report.mjs';
import { killSteps, planSteps, runStep, runSteps } from './gpu-bench-steps.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { values: o } = parseArgs({ options: {
  mode: { type: 'string' }, app: { type: 'string' }, out: { type: 'string' }, work: { type: 'string' }, budget: { type: 'string' },
  shapes: { type: 'string' }, only: { type: 'string' }, 'loader-dir': { type: 'string' }, 'allow-cpu-adapter': { type: 'boolean' },
} });
const mode = o.mode ?? 'full';
if (!o.app || !o.out || !o.work) throw new Error('gpu-bench-run.mjs needs --app, --out and --work (scripts/gpu-bench.sh passes them)');
const budget = Number(o.budget ?? (mode === 'dry' ? 3600 : 450));
const start = performance.now();
const deadline = start + budget * 1000;
// a dry run tests the script: one shape is enough
const shapes = (o.shapes ?? (mode === 'dry' ? 'qwen3.5-0.8b' : 'qwen3.5-0.8b,qwen3.5-4b')).split(',').filter(Boolean);
const resultsDir = join(o.work, 'r');
rmSync(resultsDir, { recursive: true, force: true });
mkdirSync(resultsDir, { recursive: true });
mkdirSync(o.out, { recursive: true });
const outFile = join(o.out, 'gpu-bench.json');
const say = (line) => process.stdout.write(`${line}\n`);

const sh = (cmd, args) => {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 20_000 }).trim();
  } catch {
    return null;
  }
};

function nvidiaSmi() {
  const line = sh('nvidia-smi', ['--query-gpu=name,driver_version,memory.total,pci.bus_id', '--format=csv,noheader,nounits']);
  if (!line) return null;
  const [name, driver, memory_mib, pci] = line.split('\n')[0].split(',').map((s) => s.trim());
  return { name, driver, memory_mib: Number(memory_mib), pci, gpus: line.split('\n').length };
}

/** The Vulkan loader and ICDs; points VK_DRIVER_FILES at NVIDIA's ICD when it exists (so Dawn
 * cannot fall back to a software one) and makes the ICD's library findable. */
function vulkanSetup() {
  const env = process.env;
  const cache = sh('ldconfig', ['-p']) ?? '';
  const inCache = (soname) => cache.split('\n').some((l) => l.trim().startsWith(`${soname} `) && /x86-64/.test(l));
  // the bundled libraries the system lacks (only those: a bundled one must not shadow the system's)
  const bundled = o['loader-dir'] && existsSync(o['loader-dir']) ? readdirSync(o['loader-dir']) : [];
  const missing = bundled.filter((f) => !inCache(f));
  if (missing.length > 0) {
    const dir = join(o.work, 'lib-missing');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    for (const f of missing) symlinkSync(join(o['loader-dir'], f), join(dir, f));
    env.LD_LIBRARY_PATH = [dir, env.LD_LIBRARY_PATH].filter(Boolean).join(':');
  }
  const loader = inCache('libvulkan.so.1') ? `system: ${cache.split('\n').find((l) => l.trim().startsWith('libvulkan.so.1 '))?.split('=>').pop()?.trim()}`
    : missing.includes('libvulkan.so.1') ? `bundled: ${o['loader-dir']}/libvulkan.so.1` : 'NONE (no libvulkan.so.1)';
  const dirs = ['/usr/local/nvidia/share/vulkan/icd.d', '/usr/share/vulkan/icd.d', '/etc/vulkan/icd.d', '/usr/local/share/vulkan/icd.d'];
  const icds = dirs.flatMap((d) => (existsSync(d) ? readdirSync(d).filter((f) => f.endsWith('.json')).map((f) => join(d, f)) : []));
  const nvidia = icds.find((f) => /nvidia/i.test(f));
  const preset = env.VK_DRIVER_FILES || env.VK_ICD_FILENAMES || null;
  // VK_ICD_FILENAMES too: loaders before 1.3.207 (Ubuntu 22.04's) know only that name
  if (!preset && nvidia && mode === 'full') env.VK_DRIVER_FILES = env.VK_ICD_FILENAMES = nvidia;
  const chosen = env.VK_DRIVER_FILES || env.VK_ICD_FILENAMES || null;
  let library = null;
  if (chosen && existsSync(chosen.split(':')[0])) {
    try {
      library = JSON.parse(readFileSync(chosen.split(':')[0], 'utf8')).ICD?.library_path ?? null;
    } catch { /* reported as null */ }
  }
  // a bare library name must be in the linker's cache or on LD_LIBRARY_PATH
  let libraryFound = library ? library.includes('/') ? existsSync(library) : cache.includes(library) : null;
  if (library && !libraryFound && !library.includes('/')) {
    const dir = ['/usr/local/nvidia/lib64', '/usr/local/nvidia/lib', '/usr/lib/x86_64-linux-gnu', '/usr/lib64'].find((d) => existsSync(join(d, library)));
    if (dir) {
      env.LD_LIBRARY_PATH = [env.LD_LIBRARY_PATH, dir].filter(Boolean).join(':');
      libraryFound = `via LD_LIBRARY_PATH ${dir}`;
    }
  }
  return { loader, bundled_libs_used: missing, icds_found: icds, icd_in_use: chosen ?? 'the loader default (every ICD it finds)', icd_library: library, icd_library_found: libraryFound,
    vk_driver_files_preset: preset, ld_library_path: env.LD_LIBRARY_PATH ?? null };
}

const node = process.execPath;
const ds = join(o.app, 'dist', 'src', 'cli', 'main.js');
// the prep lane (make-model, quantize) runs beside the measurements at a lower priority
const command = (st) => (st.kind === 'torch'
  ? { cmd: 'python3', args: st.args, env: { ...process.env, PYTHONUNBUFFERED: '1' } }
  : st.lane === 'prep' ? { cmd: 'nice', args: ['-n', '10', node, ds, ...st.args], env: process.env }
    : { cmd: node, args: [ds, ...st.args], env: { ...process.env, ...(st.env ?? {}) } });

const vulkan = vulkanSetup();
const gpu = nvidiaSmi();
const probe = await runStep({ name: 'adapter-probe', cmd: node, args: [join(here, 'gpu-bench-probe.mjs'), o.app], env: process.env, seconds: 90, dir: resultsDir });
let probeError = probe.error ?? null;
if (probeError) {
  // the loader's own account of which ICDs it tried and why they failed
  const again = await runStep({ name: 'adapter-probe-loader-debug', cmd: node, args: [join(here, 'gpu-bench-probe.mjs'), o.app],
    env: { ...process.env, VK_LOADER_DEBUG: 'error,warn,driver' }, seconds: 60, dir: resultsDir });
  probeError += `\n--- with VK_LOADER_DEBUG=error,warn,driver:\n${again.error ?? 'succeeded the second time'}`;
}
const adapter = probe.error ? null : probe.adapter;
const adapterText = adapter ? `${adapter.vendor} ${adapter.architecture} ${adapter.description} ${adapter.device}` : '';
const bandwidth = gpuBandwidth(gpu?.name ?? null, adapterText, process.env.GPU_BENCH_BANDWIDTH_TBS);
const v = verdict(adapter, gpu, mode);
const runWebgpu = v.runWebgpu || o['allow-cpu-adapter'] === true;
const first = `gpu-bench: DIAGNOSTICS ${v.ok ? 'OK' : 'PROBLEM'}: ${v.line}; GPU ${gpu ? `${gpu.name} (driver ${gpu.driver}, ${gpu.memory_mib} MiB)` : 'none (no nvidia-smi)'}` +
  `; bandwidth ${bandwidth.tb_s ?? '?'} TB/s (${bandwidth.matched ?? 'not in the table: gpu.bandwidth.source says more'}); Vulkan loader ${vulkan.loader}; ICD ${vulkan.icd_in_use}` +
  `${vulkan.icd_library ? ` → ${vulkan.icd_library} (${vulkan.icd_library_found ? 'found' : 'NOT FOUND'})` : ''}; mode ${mode}, budget ${budget} s`;
say(first);
if (probeError) say(`gpu-bench: adapter probe failed: ${probeError.split('\n').slice(0, 8).join(' | ')}`);

const only = o.only ? new RegExp(o.only) : null;
const steps = planSteps(mode, shapes, o.work, join(here, 'gpu-bench-torch.py'), cpus().length);
// a step --only leaves out still runs when a chosen step needs what it makes
const chosen = only ? steps.filter((s) => only.test(s.name)) : steps;
const needed = new Set(chosen.flatMap((s) => s.needs));
const plan = steps.filter((s) => chosen.includes(s) || (s.makes && needed.has(s.makes)));

function write(runs, finished) {
  const failed = Object.entries(runs).filter(([, r]) => r.error).map(([n]) => n);
  const skipped = Object.entries(runs).filter(([, r]) => r.skipped).map(([n]) => n);
  for (const r of Object.values(runs)) if (r.adapter?.description === adapter?.description) delete r.adapter; // once, at the top
  const report = {
    what: 'scripts/gpu-bench.sh', format: 2, mode, finished, date: new Date().toISOString(),
    seconds: Math.round((performance.now() - start) / 1000), budget_s: budget, shapes,
    diagnostics: { line: first, ok: v.ok, webgpu_steps_run: runWebgpu, probe_error: probeError, offered: probe.offered ?? null, ...vulkan },
    machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memory_gb: Math.round(totalmem() / 2 ** 30), node: process.version, bundle: bundleInfo() },
    gpu: { ...(gpu ?? { name: null }), bandwidth },
    adapter, failed, skipped, pending: plan.filter((s) => !(s.name in runs)).map((s) => s.name),
    summary: summarize(runs, shapes, bandwidth), runs,
  };
  writeFileSync(`${outFile}.part`, `${JSON.stringify(report, null, 1)}\n`);
  renameSync(`${outFile}.part`, outFile);
  return report;
}

function bundleInfo() {
  try {
    return JSON.parse(readFileSync(join(o.app, 'bundle.json'), 'utf8'));
  } catch {
    return null;
  }
}

let latest = {};
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.once(sig, () => {
    killSteps();
    write(latest, false);
    say(`gpu-bench: stopped by ${sig}; ${outFile} holds the steps done`);
    process.exit(1);
  });
}
write(latest, false);
const runs = await runSteps(plan, {
  dir: resultsDir, deadline, command, after: (r) => write((latest = r), false), log: say,
  // without the GPU's adapter the webgpu steps would measure a CPU; without any GPU (neither
  // adapter nor nvidia-smi) nothing here measures one
  gate: (st) => (runWebgpu ? null : !gpu ? `no GPU: ${v.line}`
    : st.kind === 'ds' && !st.name.endsWith('make-model') && !st.name.includes('.quantize-') ? `webgpu steps skipped: ${v.line}` : null),
});
const report = write(runs, true);
say(`gpu-bench: wrote ${outFile}: ${Object.keys(runs).length - report.failed.length - report.skipped.length} steps measured, ` +
  `${report.failed.length} failed${report.failed.length ? ` (${report.failed.join(', ')})` : ''}, ${report.skipped.length} skipped, ${report.seconds} s`);
say(`gpu-bench: targets: ${JSON.stringify(report.summary.targets)}`);
if (!v.ok) say(first); // the problem again, at the end of the output too
