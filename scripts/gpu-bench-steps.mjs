// scripts/gpu-bench.sh's steps: the plan (which command, in which order, with which time
// box) and the runner (each step a process group of its own, killed at its time box; its
// last stdout line is its JSON, else {"error": stderr's tail}). test/gpu-bench-report.test.ts
// runs the runner on stand-in commands; test/gpu-bench-script.test.ts runs the plan on lavapipe.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** Sizes per mode. dry: every step once, as small as still runs it (1 layer + the MTP head,
 * a 2,048-token vocabulary, a few tokens), on lavapipe; the step NAMES stay the real run's
 * (streams-8 runs 2 streams there), so the report and its rendering are tested as they are. */
const SIZES = {
  full: { mk: [], gen: 64, prompt: 128, prefill: 2048, s8: 8, s32: 32, mtpGen: 128, mtpPrompt: 32, rep: 3, kv: 4096, cap: 1 },
  dry: { mk: ['--layers', '1', '--vocab-size', '2048'], gen: 2, prompt: 2, prefill: 8, s8: 2, s32: 3, mtpGen: 4, mtpPrompt: 2, rep: 1, kv: 128, cap: 8 },
};

/** Time box of each kind of step on a GPU machine, seconds (× SIZES.cap: lavapipe on a loaded
 * 2-core machine is far slower than a GPU even at the dry run's sizes: its MTP step took over
 * 4 minutes at load 12). The 4b shape's make-model / quantize write ~9 GB. */
const CAPS = { make: 150, quantize: 120, bench: 90, prefill: 120, mtp: 150, torch: 150, copy: 60 };

/**
 * The steps in priority order, so that a run cut short by its budget has the figures that
 * matter most: first a sanity decode of every shape (the first is the smallest), then the
 * issue's targets on the largest shape first (verify-4, 32 streams, MTP, the PyTorch floor),
 * the copy bandwidth, then the rest, the quantized files last. make-model and quantize run in
 * a second lane ('prep': CPU only, at nice 10, quantize on half the cores) beside the
 * measurements, which wait for the files they need.
 * A step: {name, kind: 'ds'|'torch', lane: 'main'|'prep', args, cap, needs: [artifact], makes: artifact|null}.
 */
export function planSteps(mode, shapes, work, torchScript, cores = 2) {
  const z = SIZES[mode];
  if (!z) throw new Error(`gpu-bench: unknown mode ${mode}`);
  const art = (s, kind) => join(work, kind === 'bf16' ? s : `${s}-${kind === 'q8_0' ? 'Q8_0' : 'Q4_K_M'}.gguf`);
  const b = ['bench', '--kernels', 'webgpu', '--json', '--repeat', String(z.rep), '--prompt-tokens', String(z.prompt), '--gen-tokens', String(z.gen)];
  const defs = {
    // --layout flat: the text model alone (Qwen3_5ForCausalLM, what transformers' AutoModelForCausalLM
    // loads). The release layout's vision tower is 201 MB that every engine load (the MTP step's
    // two) converts to f32 on the host: 26 of the dry run's MTP step's 50 CPU-seconds
    'make-model': (s) => ({ kind: 'ds', lane: 'prep', cap: CAPS.make, needs: [], makes: art(s, 'bf16'),
      args: ['make-model', '--shape', s, '--out', art(s, 'bf16'), '--layout', 'flat', ...z.mk] }),
    'decode-bf16': (s) => bench(s, ['--mode', 'decode']),
    'verify-4-bf16': (s) => bench(s, ['--mode', 'verify', '--verify-tokens', '4']),
    'streams-32-bf16': (s) => bench(s, ['--mode', 'decode', '--batch', String(z.s32)]),
    'streams-8-bf16': (s) => bench(s, ['--mode', 'decode', '--batch', String(z.s8)]),
    'mtp-0.8-bf16': (s) => ({ kind: 'ds', cap: CAPS.mtp, needs: [art(s, 'bf16')], makes: null,
      args: ['bench', '--kernels', 'webgpu', '--model', art(s, 'bf16'), '--mode', 'mtp', '--accept-rate', '0.8', '--spec-tokens', '3',
        '--gen-tokens', String(z.mtpGen), '--prompt-tokens', String(z.mtpPrompt), '--repeat', '1', '--kv-cache-tokens', String(z.kv)] }),
    // seeded sampled requests (T 0.7, top-k 20, top-p 0.8): drafts drawn on the device, one
    // read-back a round (pending-drafts.ts), outputs checked equal to MTP off's
    'mtp-0.8-sampled-bf16': (s) => ({ kind: 'ds', cap: CAPS.mtp, needs: [art(s, 'bf16')], makes: null,
      args: ['bench', '--kernels', 'webgpu', '--model', art(s, 'bf16'), '--mode', 'mtp', '--accept-rate', '0.8', '--spec-tokens', '3', '--sample',
        '--temperature', '0.7', '--top-k', '20', '--top-p', '0.8',
        '--gen-tokens', String(z.mtpGen), '--prompt-tokens', String(z.mtpPrompt), '--repeat', '1', '--kv-cache-tokens', String(z.kv)] }),
    // the same with Qwen3.5's recommended thinking-mode sampling (T 1.0, top-p 0.95, top-k 20,
    // presence penalty 1.5): a penalised chain reads its drafts back before the verify (two
    // read-backs a round), outputs checked equal to MTP off's
    'mtp-0.8-qwen-sampled-bf16': (s) => ({ kind: 'ds', cap: CAPS.mtp, needs: [art(s, 'bf16')], makes: null,
      args: ['bench', '--kernels', 'webgpu', '--model', art(s, 'bf16'), '--mode', 'mtp', '--accept-rate', '0.8', '--spec-tokens', '3', '--sample',
        '--temperature', '1', '--top-k', '20', '--top-p', '0.95', '--presence-penalty', '1.5',
        '--gen-tokens', String(z.mtpGen), '--prompt-tokens', String(z.mtpPrompt), '--repeat', '1', '--kv-cache-tokens', String(z.kv)] }),
    'pytorch-floor-bf16': (s) => ({ kind: 'torch', cap: CAPS.torch, needs: [art(s, 'bf16')], makes: null,
      args: [torchScript, art(s, 'bf16'), '--prompt-tokens', String(z.prompt), '--gen-tokens', String(z.gen)] }),
    'prefill-2048-bf16': (s) => ({ kind: 'ds', cap: CAPS.prefill, needs: [art(s, 'bf16')], makes: null,
      args: ['bench', '--kernels', 'webgpu', '--json', '--repeat', '1', '--model', art(s, 'bf16'), '--mode', 'prefill', '--prompt-tokens', String(z.prefill)] }),
    // Dawn's validation skipped: what it costs the host per dispatch
    'decode-bf16-skip-validation': (s) => ({ ...bench(s, ['--mode', 'decode']), env: { DELTASERVE_DAWN_TOGGLES: 'skip_validation' } }),
    // the plain loop: each step recorded after the one before it was read back (the default
    // overlaps them, as the engine's greedy decode: engine/overlap.ts)
    'decode-bf16-plain': (s) => bench(s, ['--mode', 'decode', '--overlap', 'off']),
    // one submit a step (a GPU's default submits in chunks: kernels/webgpu/submit-chunks.ts)
    'decode-bf16-single-submit': (s) => ({ ...bench(s, ['--mode', 'decode']), env: { DELTASERVE_SUBMIT_CHUNK: '0' } }),
    // --no-mmproj: a flat checkpoint has no vision tower to write
    'quantize-q8_0': (s) => quantize(s, 'q8_0'),
    'decode-q8_0': (s) => bench(s, ['--mode', 'decode'], 'q8_0'),
    'quantize-q4_k_m': (s) => quantize(s, 'q4_k_m'),
    'decode-q4_k_m': (s) => bench(s, ['--mode', 'decode'], 'q4_k_m'),
    // the quantized matmuls at M ≤ 4 after a separate activation quantization (the default on a
    // GPU folds it into them: 129 dispatches fewer, faster in the batch model; docs/kernels.md)
    'decode-q4_k_m-unfolded': (s) => ({ ...bench(s, ['--mode', 'decode'], 'q4_k_m'), env: { DELTASERVE_FOLD_QUANT_ACTS: 'off' } }),
  };
  function bench(s, extra, file = 'bf16') {
    return { kind: 'ds', cap: CAPS.bench, needs: [art(s, file)], makes: null, args: [...b, '--model', art(s, file), ...extra] };
  }
  function quantize(s, type) {
    return { kind: 'ds', lane: 'prep', cap: CAPS.quantize, needs: [art(s, 'bf16')], makes: art(s, type),
      args: ['quantize', '--model', art(s, 'bf16'), '--out', art(s, type), '--type', type, '--no-mmproj', '--threads', String(Math.max(1, Math.floor(cores / 2)))] };
  }
  const largestFirst = [...shapes].reverse();
  const tiers = [
    [shapes, ['make-model', 'decode-bf16']],
    [largestFirst, ['verify-4-bf16', 'streams-32-bf16', 'mtp-0.8-bf16', 'pytorch-floor-bf16']],
    [null, ['copy-bandwidth']],
    [shapes, ['streams-8-bf16', 'mtp-0.8-sampled-bf16', 'mtp-0.8-qwen-sampled-bf16', 'prefill-2048-bf16', 'decode-bf16-plain', 'decode-bf16-skip-validation', 'decode-bf16-single-submit']],
    [shapes, ['quantize-q8_0', 'decode-q8_0', 'quantize-q4_k_m', 'decode-q4_k_m', 'decode-q4_k_m-unfolded']],
  ];
  const steps = [];
  for (const [list, names] of tiers) {
    if (list === null) {
      steps.push({ name: 'copy-bandwidth', kind: 'torch', cap: CAPS.copy, needs: [], makes: null, args: [torchScript, '--copy-bandwidth'] });
      continue;
    }
    for (const s of list) for (const n of names) steps.push({ name: `${s}.${n}`, ...defs[n](s) });
  }
  return steps.map((st) => ({ lane: 'main', ...st, cap: st.cap * z.cap }));
}

/** The last stdout line that parses as a JSON object, else null. */
function lastJson(text) {
  const lines = text.trim().split('\n').reverse();
  for (const l of lines.slice(0, 3)) {
    try {
      const v = JSON.parse(l);
      if (v && typeof v === 'object' && !Array.isArray(v)) return v;
    } catch { /* not JSON: try the line before */ }
  }
  return null;
}

/** stderr's tail without Dawn's start-up warnings: what names the failure. */
export function errorTail(text, lines = 12) {
  return text.trim().split('\n').filter((l) => l && !/Warning:|^deltaserve: the text model skips/.test(l)).slice(-lines).join('\n');
}

/**
 * Runs `cmd args` as its own process group with stdout/stderr to files under `dir`, killed
 * (the whole group: SIGTERM, then SIGKILL 5 s later) after `seconds`. Resolves to the step's
 * JSON with `step_seconds`, or {error, exit_code, signal, timed_out, step_seconds, command}.
 */
/** The process groups of the steps running now (killSteps ends them: the run itself was stopped). */
const running = new Set();
export function killSteps() {
  for (const pid of running) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch { /* already gone */ }
  }
}

export function runStep({ name, cmd, args, env, seconds, dir }) {
  const out = join(dir, `${name}.out`);
  const err = join(dir, `${name}.err`);
  const fo = openSync(out, 'w');
  const fe = openSync(err, 'w');
  const t0 = performance.now();
  return new Promise((resolve) => {
    let timedOut = false;
    let child;
    try {
      child = spawn(cmd, args, { detached: true, stdio: ['ignore', fo, fe], env });
    } catch (e) {
      closeSync(fo);
      closeSync(fe);
      resolve({ error: `could not start ${cmd}: ${e.message}`, step_seconds: 0, command: [cmd, ...args].join(' ') });
      return;
    }
    running.add(child.pid);
    const killGroup = (sig) => {
      try {
        process.kill(-child.pid, sig);
      } catch { /* already gone */ }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup('SIGTERM');
      setTimeout(() => killGroup('SIGKILL'), 5000).unref();
    }, Math.max(1, seconds) * 1000);
    const finish = (code, signal, spawnError) => {
      clearTimeout(timer);
      running.delete(child.pid);
      closeSync(fo);
      closeSync(fe);
      const step_seconds = Math.round((performance.now() - t0) / 100) / 10;
      const json = lastJson(readFileSync(out, 'utf8'));
      if (code === 0 && json && !timedOut) {
        resolve({ ...json, step_seconds });
        return;
      }
      const tail = errorTail(readFileSync(err, 'utf8'));
      const why = spawnError ? `could not start ${cmd}: ${spawnError.message}`
        : timedOut ? `timed out after ${seconds} s (its time box)${tail ? `; stderr: ${tail}` : ''}`
          : tail || (code === 0 ? 'exited 0 without a JSON line on stdout' : `exit code ${code}${signal ? `, signal ${signal}` : ''}, no message`);
      resolve({ error: why, exit_code: code, signal: signal ?? null, timed_out: timedOut, step_seconds, command: [cmd, ...args].join(' ') });
    };
    child.once('error', (e) => finish(null, null, e));
    child.once('exit', (code, signal) => finish(code, signal, null));
  });
}

/**
 * Runs `steps` within `deadline` (a performance.now() ms value): the lanes side by side, each
 * in its order except that a step whose files are not made yet lets the next ready one go
 * first. `after(runs)` is called after every step (the caller writes the partial JSON there). A step whose input failed, or that
 * would start with under 5 s left, is {skipped: reason}; `gate(step)` may skip one too (a
 * string: the reason). Files no unfinished step needs are deleted (the 4b shape's three
 * copies are ~17 GB). `command(step)` → {cmd, args, env}. Every result has `started_s`.
 */
export async function runSteps(steps, { dir, deadline, command, after, gate = () => null, log = () => {} }) {
  const runs = {};
  const t0 = performance.now();
  const made = new Map();
  const settle = new Map();
  steps.forEach((st, i) => {
    for (const need of st.needs) {
      const maker = steps.findIndex((m) => m.makes === need);
      if (maker >= 0 && steps[maker].lane === st.lane && maker > i) throw new Error(`gpu-bench: ${st.name} needs ${need}, made later in its lane`);
    }
    if (st.makes) made.set(st.makes, new Promise((resolve) => settle.set(st.makes, resolve)));
  });
  const settled = new Set();
  const unfinished = new Set(steps);
  async function one(st) {
    const why = (await Promise.all(st.needs.map((a) => made.get(a) ?? null))).find((x) => x !== null);
    const left = (deadline - performance.now()) / 1000;
    const gated = gate(st);
    const started_s = Math.round((performance.now() - t0) / 100) / 10;
    let r;
    if (why) r = { skipped: `its input was not made (${why})` };
    else if (gated) r = { skipped: gated };
    else if (left < 5) r = { skipped: `the run's time budget was spent (${Math.max(0, left).toFixed(0)} s left)` };
    else {
      const seconds = Math.min(st.cap, Math.floor(left - 2));
      log(`gpu-bench: ${st.name} (time box ${seconds} s)`);
      r = await runStep({ name: st.name, ...command(st), seconds, dir });
      log(`gpu-bench: ${st.name}: ${r.error ? `FAILED after ${r.step_seconds} s: ${r.error.split('\n')[0]}` : `${r.step_seconds} s`}`);
    }
    if (st.makes) {
      settled.add(st.makes);
      settle.get(st.makes)(r.error || r.skipped ? `${st.name}: ${r.error ? 'failed' : 'skipped'}` : null);
    }
    runs[st.name] = { ...r, started_s };
    unfinished.delete(st);
    for (const a of made.keys()) {
      if (![...unfinished].some((s) => s.needs.includes(a) || s.makes === a) && existsSync(a)) rmSync(a, { recursive: true, force: true });
    }
    after(runs);
  }
  // a lane runs its first step whose files are made (or failed): a measurement waiting for the
  // largest shape's file lets the ones after it go first
  const lane = async (list) => {
    const todo = [...list];
    while (todo.length > 0) {
      const i = todo.findIndex((st) => st.needs.every((a) => !made.has(a) || settled.has(a)));
      if (i < 0) {
        await Promise.race(todo.flatMap((st) => st.needs.filter((a) => made.has(a) && !settled.has(a)).map((a) => made.get(a))));
        continue;
      }
      await one(todo.splice(i, 1)[0]);
    }
  };
  await Promise.all([...new Set(steps.map((s) => s.lane ?? 'main'))].map((l) => lane(steps.filter((s) => (s.lane ?? 'main') === l))));
  return runs;
}
