// The state of a terminal chat (`deltaserve chat`): the conversation so far, the thinking
// switch, the last answer's numbers, and the slash commands over them. No I/O here but
// /save's file write; chat.ts drives it from the terminal.
import { writeFileSync } from 'node:fs';
import type { ChatMessage } from '../frontend/chat-template.js';
import type { GenerateEvent } from '../engine/request.js';

type Done = Extract<GenerateEvent, { type: 'done' }>;

/** The numbers of one answer, for /stats. */
export interface TurnStats {
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly generatedTokens: number;
  /** Milliseconds from the request to its first token (null: none came). */
  readonly ttftMs: number | null;
  /** Tokens a second after the first (null: fewer than two tokens). */
  readonly decodeTokPerS: number | null;
  /** MTP: tokens emitted per verify round ((accepted + rounds) / rounds), null without rounds. */
  readonly mtpAcceptLength: number | null;
  /** MTP: accepted / drafted, null without drafts. */
  readonly mtpAcceptRate: number | null;
}

export function turnStats(done: Done, startMs: number, firstMs: number | null, endMs: number): TurnStats {
  const n = done.usage.completionTokens;
  const spec = done.spec;
  return {
    promptTokens: done.usage.promptTokens,
    cachedTokens: done.usage.cachedTokens,
    generatedTokens: n,
    ttftMs: firstMs === null ? null : firstMs - startMs,
    decodeTokPerS: firstMs !== null && n > 1 && endMs > firstMs ? (n - 1) * 1000 / (endMs - firstMs) : null,
    mtpAcceptLength: spec && spec.rounds > 0 ? (spec.accepted + spec.rounds) / spec.rounds : null,
    mtpAcceptRate: spec && spec.drafted > 0 ? spec.accepted / spec.drafted : null,
  };
}

/** /stats text: one line per number. */
export function formatStats(s: TurnStats | null, turns: number): string {
  if (!s) return 'no answer yet';
  const or = (v: number | null, f: (x: number) => string): string => (v === null ? 'n/a' : f(v));
  return [
    `turns in history: ${turns}`,
    `prompt tokens:    ${s.promptTokens} (cached ${s.cachedTokens})`,
    `generated tokens: ${s.generatedTokens}`,
    `time to first token: ${or(s.ttftMs, (v) => `${v.toFixed(0)} ms`)}`,
    `decode: ${or(s.decodeTokPerS, (v) => `${v.toFixed(1)} tok/s`)}`,
    `MTP accept length: ${or(s.mtpAcceptLength, (v) => v.toFixed(2))}, accept rate: ${or(s.mtpAcceptRate, (v) => `${(v * 100).toFixed(0)}%`)}`,
  ].join('\n');
}

export const CHAT_COMMANDS_HELP = `commands:
  /reset            forget the conversation (the system message stays)
  /think on|off     reasoning before answers (shown dimmed) or not
  /stats            numbers of the last answer: prompt and cached tokens, TTFT, tok/s, MTP accept
  /save FILE        write the conversation's messages as JSON
  /help             this list
  /bye              exit (also Ctrl-D, or Ctrl-C twice)
Ctrl-C stops an answer; a second Ctrl-C exits.`;

/** What a command line asks of the loop besides printing `reply`. */
export interface CommandResult {
  readonly reply: string;
  readonly exit?: boolean;
}

export class ChatSession {
  private history: ChatMessage[] = [];
  private last: TurnStats | null = null;

  constructor(private readonly system: string | undefined, public think: boolean) {}

  /** The messages of the next request: the conversation plus the new user message. */
  messagesWith(user: string): ChatMessage[] {
    return [...this.preamble(), ...this.history, { role: 'user', content: user }];
  }

  /** A finished answer joins the history (an interrupted one does not). */
  record(user: string, done: Done, stats: TurnStats): void {
    const answer: ChatMessage = { role: 'assistant', content: done.content };
    if (done.reasoning !== null) answer.reasoning_content = done.reasoning;
    this.history.push({ role: 'user', content: user }, answer);
    this.last = stats;
  }

  /** Numbers of an answer that is not kept (stopped, failed): /stats still shows them. */
  noteStats(stats: TurnStats): void {
    this.last = stats;
  }

  get turns(): number {
    return this.history.length / 2;
  }

  /** Every message so far, the system one first (what /save writes). */
  messages(): ChatMessage[] {
    return [...this.preamble(), ...this.history];
  }

  /** Run a `/command` line. */
  command(line: string): CommandResult {
    const [name, ...args] = line.trim().split(/\s+/);
    const arg = args.join(' ');
    switch (name) {
      case '/reset':
        this.history = [];
        return { reply: 'conversation cleared' };
      case '/think':
        if (arg === 'on' || arg === 'off') {
          this.think = arg === 'on';
          return { reply: `thinking ${arg}` };
        }
        if (arg === '') return { reply: `thinking is ${this.think ? 'on' : 'off'} (/think on|off)` };
        return { reply: `/think takes on or off (got "${arg}")` };
      case '/stats':
        return { reply: formatStats(this.last, this.turns) };
      case '/save':
        return { reply: this.save(arg) };
      case '/help':
      case '/?':
        return { reply: CHAT_COMMANDS_HELP };
      case '/bye':
      case '/exit':
      case '/quit':
        return { reply: '', exit: true };
      default:
        return { reply: `unknown command ${name ?? ''} (/help lists them)` };
    }
  }

  private save(file: string): string {
    if (file === '') return '/save needs a file name';
    try {
      writeFileSync(file, JSON.stringify(this.messages(), null, 2) + '\n');
    } catch (e) {
      return `could not write ${file}: ${(e as Error).message}`;
    }
    return `saved ${this.messages().length} messages to ${file}`;
  }

  private preamble(): ChatMessage[] {
    return this.system !== undefined ? [{ role: 'system', content: this.system }] : [];
  }
}
