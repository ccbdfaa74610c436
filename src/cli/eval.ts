// `deltaserve eval`: run chat JSONL eval sets ({task, messages, answer} per line) through
// the engine — greedy, chat template with thinking on, many requests at once — extract the
// final answer after `</think>` and report exact-match accuracy per task as one JSON object:
//   {"tasks": {"<task>": {"n", "accuracy", "accuracy_spec", "identical_fraction"}},
//    "spec": {"tokens", "accept_len_mean"}, "timing": {"off", "on", "spec_speedup"}}
// --compare-spec runs MTP off, then on, and reports both accuracies and the fraction of
// items whose generated ids are identical.
import { parseArgs } from 'node:util';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { Engine, type EngineOptions } from '../engine/engine.js';
import { validateMessages, type ChatMessage } from '../frontend/chat-template.js';
import { extractFinalAnswer } from '../tokenizer/reasoning.js';
import { DeltaserveError } from '../util/errors.js';
import { int, str } from './args.js';
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineOptions } from './engine-flags.js';

export const EVAL_HELP = `deltaserve eval --data FILE.jsonl [FILE2.jsonl ...] [options]
  --data FILE               eval set: one {"task", "messages", "answer"} object per line
                            (repeat --data or list several files after it; required)
  --limit N                 use the first N items of each task (default: all)
  --max-tokens N            generation budget per item (default 128)
  --spec-tokens K           MTP speculative draft tokens (default 0 = off; unlike serve)
  --compare-spec            run with MTP off, then on (K = --spec-tokens, default 3); report
                            both accuracies and the fraction of identical outputs
  --details FILE            also write one JSON line per item (task, answer, predictions)
${ENGINE_FLAGS_HELP.split('\n').filter((l) => !l.trimStart().startsWith('--spec-tokens')).join('\n')}
Output (stdout): {"tasks": {"<task>": {"n", "accuracy", "accuracy_spec", "identical_fraction"}},
                  "spec": {"tokens", "accept_len_mean"},
                  "timing": {"off"|"on": {"seconds", "tokens", "tok_s"}, "spec_speedup"}}
                  (generation wall time after the model loaded)`;

export interface EvalItem {
  readonly task: string;
  readonly messages: ChatMessage[];
  readonly answer: string;
  /** `file:line`, for messages. */
  readonly where: string;
}

export interface ItemOutput {
  readonly text: string;
  readonly outputIds: readonly number[];
  /** (accepted + rounds) / rounds of this item, or null without verify rounds. */
  readonly acceptLen: number | null;
  readonly error?: string;
}

export interface TaskResult {
  n: number;
  accuracy: number;
  accuracy_spec: number | null;
  identical_fraction: number | null;
}

export interface EvalResult {
  tasks: Record<string, TaskResult>;
  spec: { tokens: number; accept_len_mean: number | null };
  /** Generation wall time after the model loaded: per run (MTP off; on with --compare-spec). */
  timing?: { off?: RunTiming; on?: RunTiming; spec_speedup?: number };
}

export interface RunTiming {
  seconds: number;
  tokens: number;
  tok_s: number;
}

/** Items run on one engine and the wall time they took (engine load excluded). */
export interface ItemRun {
  readonly outputs: ItemOutput[];
  readonly seconds: number;
}

function timing(run: ItemRun): RunTiming {
  const tokens = run.outputs.reduce((a, o) => a + o.outputIds.length, 0);
  return { seconds: run.seconds, tokens, tok_s: tokens / Math.max(1e-9, run.seconds) };
}

/** Read eval JSONL files; `limit` keeps the first N items of each task (in file order). */
export function loadEvalItems(files: readonly string[], limit?: number): EvalItem[] {
  const items: EvalItem[] = [];
  const perTask = new Map<string, number>();
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      throw new DeltaserveError('bad_request', `--data ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    const fallbackTask = basename(file).replace(/(\.public)?\.jsonl?$/, '');
    text.split('\n').forEach((line, i) => {
      if (line.trim() === '') return;
      const where = `${file}:${i + 1}`;
      let o: Record<string, unknown>;
      try {
        o = JSON.parse(line) as Record<string, unknown>;
      } catch (e) {
        throw new DeltaserveError('bad_request', `${where}: not valid JSON (${(e as Error).message})`);
      }
      if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new DeltaserveError('bad_request', `${where}: expected a JSON object`);
      const task = typeof o['task'] === 'string' && o['task'] !== '' ? o['task'] : fallbackTask;
      const answer = o['answer'];
      if (typeof answer !== 'string' && typeof answer !== 'number') throw new DeltaserveError('bad_request', `${where}: "answer" must be a string`);
      let messages: ChatMessage[];
      try {
        messages = validateMessages(o['messages']);
      } catch (e) {
        throw new DeltaserveError('bad_request', `${where}: ${(e as Error).message}`);
      }
      const seen = perTask.get(task) ?? 0;
      if (limit !== undefined && seen >= limit) return;
      perTask.set(task, seen + 1);
      items.push({ task, messages, answer: String(answer).trim(), where });
    });
  }
  return items;
}

/** A one-line item counter on stderr, drawn only on a TTY. */
function itemProgress(label: string, total: number): { tick(): void; done(): void } {
  const stream = process.stderr;
  if (!stream.isTTY) return { tick() {}, done() {} };
  let count = 0;
  let last = 0;
  const start = Date.now();
  const draw = (): void => {
    last = Date.now();
    const w = 30;
    const filled = total > 0 ? Math.round((count / total) * w) : w;
    const rate = count / Math.max(1e-3, (last - start) / 1000);
    stream.write(`\r${label} [${'#'.repeat(filled)}${'.'.repeat(w - filled)}] ${count}/${total} ${rate.toFixed(1)} items/s\x1b[K`);
  };
  return {
    tick() {
      count++;
      if (Date.now() - last >= 100 || count === total) draw();
    },
    done() {
      draw();
      stream.write('\n');
    },
  };
}

/** Run every item (greedy, thinking on) on a fresh engine; outputs in item order. */
export async function runItems(opts: EngineOptions, items: readonly EvalItem[], maxTokens: number, label = 'eval'): Promise<ItemRun> {
  const engine = await Engine.load(opts);
  const bar = itemProgress(label, items.length);
  const out: ItemOutput[] = new Array<ItemOutput>(items.length);
  const start = performance.now();
  try {
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < items.length; i = next++) {
        const it = items[i]!;
        try {
          const d = await engine.complete(engine.info.frontend.withPromptIds({ messages: it.messages, think: true, maxTokens, temperature: 0 }));
          const s = d.spec;
          out[i] = {
            text: d.text, outputIds: d.outputIds, acceptLen: s && s.rounds > 0 ? (s.accepted + s.rounds) / s.rounds : null,
            ...(d.finishReason === 'error' ? { error: d.error ?? 'generation failed' } : {}),
          };
        } catch (e) {
          out[i] = { text: '', outputIds: [], acceptLen: null, error: (e as Error).message };
        }
        if (out[i]!.error) process.stderr.write(`deltaserve eval: ${it.where}: ${out[i]!.error}\n`);
        bar.tick();
      }
    };
    const concurrency = Math.max(1, (opts.maxRunning ?? 16) * 2);
    await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  } finally {
    bar.done();
    await engine.close();
  }
  return { outputs: out, seconds: (performance.now() - start) / 1000 };
}

const correct = (it: EvalItem, o: ItemOutput): boolean => !o.error && extractFinalAnswer(o.text) === it.answer;

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Aggregate per task. `spec` is the MTP-on run of --compare-spec (null otherwise); the
 * accept length comes from whichever run used speculation. */
export function summarize(items: readonly EvalItem[], base: readonly ItemOutput[], spec: readonly ItemOutput[] | null, specTokens: number): EvalResult {
  const tasks: Record<string, TaskResult> = {};
  const groups = new Map<string, number[]>();
  items.forEach((it, i) => groups.set(it.task, [...(groups.get(it.task) ?? []), i]));
  for (const [task, idx] of groups) {
    const n = idx.length;
    const frac = (pred: (i: number) => boolean): number => idx.filter(pred).length / n;
    tasks[task] = {
      n,
      accuracy: frac((i) => correct(items[i]!, base[i]!)),
      accuracy_spec: spec ? frac((i) => correct(items[i]!, spec[i]!)) : null,
      identical_fraction: spec ? frac((i) => !base[i]!.error && !spec[i]!.error && sameIds(base[i]!.outputIds, spec[i]!.outputIds)) : null,
    };
  }
  const lens = (spec ?? base).map((o) => o.acceptLen).filter((x): x is number => x !== null);
  return { tasks, spec: { tokens: specTokens, accept_len_mean: lens.length > 0 ? lens.reduce((a, b) => a + b, 0) / lens.length : null } };
}

export interface EvaluateOptions {
  readonly engine: EngineOptions;
  readonly items: readonly EvalItem[];
  readonly maxTokens: number;
  readonly specTokens: number;
  readonly compareSpec: boolean;
}

/** The whole eval; also returns per-item outputs (for --details). */
export async function evaluate(o: EvaluateOptions): Promise<{ result: EvalResult; base: ItemOutput[]; spec: ItemOutput[] | null }> {
  // `specTokens` is passed through EngineOptions for the MTP engine (ignored by engines without it).
  const withSpec = (k: number): EngineOptions => ({ ...o.engine, specTokens: k }) as EngineOptions;
  if (!o.compareSpec) {
    const run = await runItems(withSpec(o.specTokens), o.items, o.maxTokens, o.specTokens > 0 ? `eval (MTP ${o.specTokens})` : 'eval');
    const t = timing(run);
    const result = { ...summarize(o.items, run.outputs, null, o.specTokens), timing: o.specTokens > 0 ? { on: t } : { off: t } };
    return { result, base: run.outputs, spec: null };
  }
  const off = await runItems(withSpec(0), o.items, o.maxTokens, 'eval (MTP off)');
  const on = await runItems(withSpec(o.specTokens), o.items, o.maxTokens, `eval (MTP ${o.specTokens})`);
  const timed = { off: timing(off), on: timing(on), spec_speedup: off.seconds / Math.max(1e-9, on.seconds) };
  return { result: { ...summarize(o.items, off.outputs, on.outputs, o.specTokens), timing: timed }, base: off.outputs, spec: on.outputs };
}

export async function runEval(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv, allowPositionals: true, options: {
      ...ENGINE_FLAGS, data: { type: 'string', multiple: true }, limit: { type: 'string' }, 'max-tokens': { type: 'string' },
      'spec-tokens': { type: 'string' }, 'compare-spec': { type: 'boolean' }, details: { type: 'string' },
    },
  });
  const data = [...((values['data'] as string[] | undefined) ?? []), ...positionals];
  if (data.length === 0) throw new DeltaserveError('bad_request', `eval needs --data FILE.jsonl\n${EVAL_HELP}`);
  if (!values['data'] && positionals.length > 0) throw new DeltaserveError('bad_request', `unexpected argument "${positionals[0]}" (eval sets go after --data)`);
  const compareSpec = values['compare-spec'] === true;
  const specTokens = int(values, 'spec-tokens', compareSpec ? 1 : 0) ?? (compareSpec ? 3 : 0);
  const items = loadEvalItems(data, int(values, 'limit', 1));
  if (items.length === 0) throw new DeltaserveError('bad_request', `no eval items in ${data.join(', ')}`);
  const { result, base, spec } = await evaluate({
    engine: engineOptions(values), items, maxTokens: int(values, 'max-tokens', 1) ?? 128, specTokens, compareSpec,
  });
  const details = str(values, 'details');
  if (details) {
    writeFileSync(details, items.map((it, i) => JSON.stringify({
      task: it.task, where: it.where, answer: it.answer,
      prediction: extractFinalAnswer(base[i]!.text), correct: correct(it, base[i]!), text: base[i]!.text,
      ...(spec ? {
        prediction_spec: extractFinalAnswer(spec[i]!.text), correct_spec: correct(it, spec[i]!),
        identical: sameIds(base[i]!.outputIds, spec[i]!.outputIds),
      } : {}),
      ...(base[i]!.error ? { error: base[i]!.error } : {}),
    })).join('\n') + '\n');
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}
