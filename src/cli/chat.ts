// `deltaserve chat`: an interactive chat in the terminal (node:readline). Answers stream as
// they are generated, reasoning dimmed (hidden with thinking off); the conversation is kept,
// so each turn's prompt extends the last one and the prefix cache reuses it.
//
// Ctrl-C: during an answer it stops the answer (the turn is not kept); at the prompt it
// drops a half-typed line; a Ctrl-C right after another one (at an empty prompt, or two
// within a second during an answer) exits. Ctrl-D, /bye and the end of piped input exit too. On a terminal readline reads
// Ctrl-C as a key (raw mode); from a pipe it arrives as SIGINT: both take the same path.
import { basename } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Engine } from '../engine/engine.js';
import { formatPlan } from '../engine/memory-plan.js';
import type { GenerateRequest } from '../engine/request-builder.js';
import type { GenerateEvent } from '../engine/request.js';
import { DeltaserveError } from '../util/errors.js';
import { AnswerView, colorAllowed, DIM, UNDIM, type Sink } from './answer-view.js';
import { type ArgValues, param, str } from './args.js';
import { CHAT_COMMANDS_HELP, ChatSession, turnStats } from './chat-session.js';
import { DEFAULT_MODEL, ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineOptions, reportKernels } from './engine-flags.js';

export const CHAT_HELP = `deltaserve chat [options]
  an interactive chat in the terminal: answers stream, reasoning shows dimmed, the
  conversation is kept (each turn reuses the last through the prefix cache)
  --system TEXT             a system message at the start of the conversation
  --no-think                no reasoning (the template's enable_thinking=false); /think on|off switches
  --max-tokens N            at most N tokens an answer (default: up to the context length)
  --temperature T --top-p P --top-k K --min-p P --seed S   sampling (default greedy)
  --ignore-eos              go on past the end-of-answer token, up to --max-tokens (testing)
${CHAT_COMMANDS_HELP.split('\n').map((l) => `  ${l}`).join('\n')}
${ENGINE_FLAGS_HELP}`;

const CHAT_FLAGS = {
  ...ENGINE_FLAGS, system: { type: 'string' }, 'no-think': { type: 'boolean' }, 'max-tokens': { type: 'string' },
  temperature: { type: 'string' }, 'top-p': { type: 'string' }, 'top-k': { type: 'string' }, 'min-p': { type: 'string' },
  seed: { type: 'string' }, 'ignore-eos': { type: 'boolean' },
} as const;

/** Two Ctrl-C within this many milliseconds during an answer exit. */
const DOUBLE_INTERRUPT_MS = 1000;

type Done = Extract<GenerateEvent, { type: 'done' }>;

/** Sampling and length of every answer, from the flags (range-checked as the API's fields). */
function answerSettings(v: ArgValues, maxContext: number): Partial<GenerateRequest> {
  const s: Record<string, unknown> = {
    maxTokens: param(v, 'maxTokens', maxContext), temperature: param(v, 'temperature'), topP: param(v, 'topP'),
    topK: param(v, 'topK'), minP: param(v, 'minP'), seed: param(v, 'seed'), ignoreEos: v['ignore-eos'] === true ? true : undefined,
  };
  for (const k of Object.keys(s)) if (s[k] === undefined) delete s[k];
  return s as Partial<GenerateRequest>;
}

export async function runChat(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: CHAT_FLAGS });
  const opts = engineOptions(values);
  const engine = await Engine.load(opts);
  try {
    reportKernels(engine.info.kernels, opts.kernels);
    if (engine.memoryPlan) process.stderr.write(`deltaserve: ${formatPlan(engine.memoryPlan)}\n`);
    const settings = answerSettings(values, engine.maxContext);
    const session = new ChatSession(str(values, 'system'), values['no-think'] !== true);
    const name = basename(str(values, 'model') ?? DEFAULT_MODEL);
    await new ChatLoop(engine, session, settings).run(name);
  } finally {
    await engine.close();
  }
}

class ChatLoop {
  private rl: Interface | null = null;
  private readonly lines: string[] = [];
  private wake: (() => void) | null = null;
  private inputEnded = false;
  private exiting = false;
  /** The answer being generated (null at the prompt). */
  private answering: AbortController | null = null;
  /** The last input was a Ctrl-C: another one at the prompt exits. */
  private armed = false;
  private lastInterrupt = 0;
  private readonly terminal = process.stdin.isTTY === true && process.stdout.isTTY === true;
  private readonly out: Sink = { write: (t) => void process.stdout.write(t), isTTY: process.stdout.isTTY === true };

  constructor(private readonly engine: Engine, private readonly session: ChatSession, private readonly settings: Partial<GenerateRequest>) {}

  async run(modelName: string): Promise<void> {
    const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: this.terminal, prompt: '>>> ' });
    this.rl = rl;
    const onInterrupt = (): void => this.interrupt();
    rl.on('line', (line) => this.arrive(line));
    rl.on('close', () => {
      this.inputEnded = true;
      this.notify();
    });
    rl.on('SIGINT', onInterrupt);
    process.on('SIGINT', onInterrupt);
    this.note(`chatting with ${modelName} (context ${this.engine.maxContext} tokens, thinking ${this.session.think ? 'on' : 'off'}); ` +
      '/help for commands, Ctrl-C stops an answer, Ctrl-C twice exits');
    try {
      for (;;) {
        if (this.terminal) rl.prompt();
        const line = await this.nextLine();
        if (line === null) break;
        if (await this.handle(line)) break;
      }
    } finally {
      process.off('SIGINT', onInterrupt);
      rl.close();
      if (this.terminal) process.stdout.write('\n');
    }
  }

  /** One input line; true when the chat should end. */
  private async handle(line: string): Promise<boolean> {
    this.armed = false;
    const text = line.trim();
    if (text === '') return false;
    if (text.startsWith('/')) {
      const r = this.session.command(text);
      if (r.reply) process.stdout.write(`${r.reply}\n`);
      return r.exit === true;
    }
    await this.answer(line);
    return this.exiting;
  }

  private async answer(user: string): Promise<void> {
    const ctl = new AbortController();
    const view = new AnswerView({ content: this.out, reasoning: this.session.think ? this.out : null, color: colorAllowed() });
    const start = performance.now();
    let first: number | null = null;
    let done: Done | null = null;
    this.answering = ctl;
    try {
      const events = this.engine.generate(this.engine.info.frontend.withPromptIds({ ...this.settings, messages: this.session.messagesWith(user), think: this.session.think, signal: ctl.signal }));
      for await (const ev of events) {
        if (ev.type === 'done') done = ev;
        else {
          if (first === null && ev.ids.length > 0) first = performance.now();
          view.push(ev.reasoning, ev.content);
        }
      }
    } catch (e) {
      if (!(e instanceof DeltaserveError) || e.code === 'internal') throw e;
      const hint = e.code === 'prompt_too_long' ? ' (/reset starts a new conversation)' : '';
      this.note(`${e.message}${hint}`);
      return;
    } finally {
      this.answering = null;
    }
    view.end();
    if (!done) throw new DeltaserveError('internal', 'an answer ended without a done event');
    const stats = turnStats(done, start, first, performance.now());
    if (done.finishReason === 'abort' || done.finishReason === 'error') {
      this.session.noteStats(stats);
      this.note(done.finishReason === 'abort' ? 'stopped (this turn is not kept)' : `the answer failed: ${done.error ?? 'unknown error'} (not kept)`);
      return;
    }
    this.session.record(user, done, stats);
    if (done.finishReason === 'length') this.note('the answer reached its token limit');
  }

  /** Ctrl-C: stop the answer, clear the line, or exit (see the file comment). */
  private interrupt(): void {
    const now = Date.now();
    const quick = now - this.lastInterrupt < DOUBLE_INTERRUPT_MS;
    this.lastInterrupt = now;
    if (this.answering) {
      if (quick) this.exiting = true;
      this.answering.abort();
      this.armed = true;
      return;
    }
    const typed = this.rl !== null && this.rl.line.length > 0;
    if ((this.armed && !typed) || !this.terminal) {
      this.exiting = true;
      this.notify();
      return;
    }
    // a half-typed line is dropped first; the next Ctrl-C exits
    this.armed = true;
    this.rl?.write(null, { ctrl: true, name: 'e' });
    this.rl?.write(null, { ctrl: true, name: 'u' });
    process.stdout.write('\n');
    this.note('Ctrl-C again (or /bye, Ctrl-D) exits');
    this.rl?.prompt();
  }

  private arrive(line: string): void {
    this.lines.push(line);
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /** The next input line; null at exit or at the end of the input. */
  private async nextLine(): Promise<string | null> {
    for (;;) {
      if (this.exiting) return null;
      const line = this.lines.shift();
      if (line !== undefined) return line;
      if (this.inputEnded) return null;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** A message of the chat itself (not the model's): dimmed on a terminal. */
  private note(text: string): void {
    process.stdout.write(this.out.isTTY && colorAllowed() ? `${DIM}${text}${UNDIM}\n` : `${text}\n`);
  }
}
