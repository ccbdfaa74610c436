// Rendering one conversation message as DOM (text nodes only, Markdown through
// markdown.ts), and the live view of an answer being streamed.
import { h, replaceChildren } from '../shared/dom.js';
import type { ImageView } from './history.js';
import { renderMarkdown } from './markdown.js';
import { type Schema, validate } from './schema.js';
import type { AssistantMessage, ImageAttachment, Message, MessageStats, ToolCall } from './types.js';

export interface MessageActions {
  /** Replace user message `index` with `text`, drop what follows, answer again. */
  edit(index: number, text: string): void;
  /** Drop assistant message `index` (and anything after it) and answer again. */
  regenerate(index: number): void;
  /** The user typed the result of a tool call. */
  toolResult(call: ToolCall, text: string): void;
}

/** The messages of a conversation; `busy` hides the actions that would start a request.
 * `images` marks the images no longer sent and places its note (history.ts). */
export function renderMessages(list: HTMLElement, messages: readonly Message[], actions: MessageActions, busy: boolean, images: ImageView | null = null): void {
  const ctx: RenderContext = {
    answered: new Set(messages.flatMap((m) => (m.role === 'tool' ? [m.tool_call_id] : []))),
    lastAssistant: messages.map((m) => m.role).lastIndexOf('assistant'),
    actions, busy, images,
  };
  const note = images && images.noteAfter >= 0 ? h('div', { class: 'history-note', role: 'note' }, images.note) : null;
  replaceChildren(list, ...messages.flatMap((m, i) => (i === images?.noteAfter && note ? [messageEl(m, i, ctx), note] : [messageEl(m, i, ctx)])));
}

interface RenderContext {
  /** Ids of the tool calls that have a result. */
  readonly answered: ReadonlySet<string>;
  /** Index of the last assistant message (the one with ↻ Regenerate). */
  readonly lastAssistant: number;
  readonly actions: MessageActions;
  readonly busy: boolean;
  readonly images: ImageView | null;
}

function messageEl(m: Message, i: number, ctx: RenderContext): HTMLElement {
  if (m.role === 'user') return userMessage(m.content, m.images ?? [], i, ctx.actions, ctx.busy, (k) => ctx.images?.sent(i, k) ?? true);
  if (m.role === 'tool') return toolResultCard(m.name, m.content);
  const el = assistantShell();
  fillAssistant(el, m, null);
  el.appendChild(toolCards(m.tool_calls ?? [], ctx.answered, ctx.actions, ctx.busy));
  if (!ctx.busy && i === ctx.lastAssistant) {
    el.appendChild(h('div', { class: 'actions' }, h('button', { type: 'button', class: 'regenerate', onclick: () => ctx.actions.regenerate(i) }, '↻ Regenerate')));
  }
  return el;
}

/** The images of a user message as thumbnails (alt text: the file's name); one no longer
 * sent to the model is dimmed and says so. */
function thumbnails(images: readonly ImageAttachment[], sent: (k: number) => boolean): HTMLElement | null {
  if (images.length === 0) return null;
  return h('div', { class: 'thumbs' }, ...images.map((im, k) => (sent(k)
    ? h('img', { src: im.url, alt: im.name, title: im.name })
    : h('img', { src: im.url, alt: im.name, class: 'unsent', title: `${im.name} (no longer sent to the model)` }))));
}

function userMessage(text: string, images: readonly ImageAttachment[], index: number, actions: MessageActions, busy: boolean,
  sent: (k: number) => boolean): HTMLElement {
  const thumbs = thumbnails(images, sent);
  const body = h('div', { class: 'text' }, text);
  const el = h('div', { class: 'msg user' }, thumbs, body);
  if (busy) return el;
  const editButton = h('button', { type: 'button', class: 'edit' }, '✎ Edit');
  editButton.addEventListener('click', () => {
    const area = h('textarea', { class: 'edit-box', rows: Math.min(12, text.split('\n').length + 1) });
    area.value = text;
    const save = h('button', { type: 'button', class: 'primary save', onclick: () => actions.edit(index, area.value) }, 'Save & send');
    const cancel = h('button', { type: 'button', onclick: () => replaceChildren(el, thumbs, body, actionsRow) }, 'Cancel');
    replaceChildren(el, thumbs, area, h('div', { class: 'actions' }, save, cancel));
    area.focus();
  });
  const actionsRow = h('div', { class: 'actions hover-actions' }, editButton);
  el.appendChild(actionsRow);
  return el;
}

function toolResultCard(name: string, content: string): HTMLElement {
  return h('div', { class: 'msg tool-result' }, h('div', { class: 'card-head' }, `Tool result · ${name}`), h('pre', {}, content));
}

function toolCards(calls: readonly ToolCall[], answered: ReadonlySet<string>, actions: MessageActions, busy: boolean): DocumentFragment {
  const frag = document.createDocumentFragment();
  for (const c of calls) {
    const card = h('div', { class: 'tool-call' }, h('div', { class: 'card-head' }, 'Tool call · ', h('code', {}, c.name)),
      h('pre', { class: 'args' }, prettyJson(c.arguments)));
    if (!answered.has(c.id) && !busy) {
      const area = h('textarea', { class: 'tool-input', rows: 3, placeholder: `Result of ${c.name} (text or JSON)` });
      const send = h('button', { type: 'button', class: 'primary tool-send', onclick: () => actions.toolResult(c, area.value) }, 'Send result');
      card.append(area, h('div', { class: 'actions' }, send));
    }
    frag.appendChild(card);
  }
  return frag;
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** An empty assistant message: waiting indicator, reasoning block, answer, structured view, stats. */
export function assistantShell(): HTMLElement {
  const waiting = h('div', { class: 'waiting', hidden: true, role: 'status' }, h('span', { class: 'dots', 'aria-hidden': 'true' }), h('span', { class: 'waiting-text' }));
  const reasoning = h('details', { class: 'reasoning', hidden: true }, h('summary', {}, 'Reasoning'), h('div', { class: 'reasoning-text' }));
  return h('div', { class: 'msg assistant' }, waiting, reasoning, h('div', { class: 'answer' }), h('div', { class: 'structured' }),
    h('div', { class: 'error', hidden: true }), h('div', { class: 'stats' }));
}

const part = (el: HTMLElement, cls: string): HTMLElement => el.querySelector<HTMLElement>(`.${cls}`)!;

/** Elapsed time for people: 0.4 s, 12.3 s, 2 min 05 s. */
export function fmtSeconds(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${String(Math.floor(s % 60)).padStart(2, '0')} s`;
}

/** While streaming: ms since the request was sent (nothing arrived yet) or since the reasoning began. */
export interface LiveClock {
  readonly waitingMs: number | null;
  readonly thinkingMs: number | null;
}

function reasoningSummary(m: AssistantMessage, clock: LiveClock | null): string {
  if (clock?.thinkingMs != null) return `Thinking… ${fmtSeconds(clock.thinkingMs)}`;
  const parts = [m.reasoning_ms !== undefined ? `Thought for ${fmtSeconds(m.reasoning_ms)}` : 'Reasoning'];
  if (m.reasoning_tokens !== undefined) parts.push(`${m.reasoning_tokens} token${m.reasoning_tokens === 1 ? '' : 's'}`);
  return parts.join(' · ');
}

/** Show `m` in a shell (`clock`: the answer is still coming). */
export function fillAssistant(el: HTMLElement, m: AssistantMessage, clock: LiveClock | null): void {
  const waiting = part(el, 'waiting');
  waiting.hidden = clock?.waitingMs == null;
  part(waiting, 'waiting-text').textContent = clock?.waitingMs != null ? `Waiting for the model… ${fmtSeconds(clock.waitingMs)}` : '';
  const details = part(el, 'reasoning') as HTMLDetailsElement;
  details.hidden = m.reasoning === '';
  part(details, 'reasoning-text').textContent = m.reasoning;
  details.querySelector('summary')!.textContent = reasoningSummary(m, clock);
  replaceChildren(part(el, 'answer'), renderMarkdown(m.content));
  const err = part(el, 'error');
  err.hidden = m.error === undefined;
  err.textContent = m.error ?? '';
  replaceChildren(part(el, 'structured'), clock === null && m.schema !== undefined && m.content !== '' ? structuredView(m.content, m.schema) : null);
  replaceChildren(part(el, 'stats'), ...(m.stats ? statsLine(m.stats) : []));
}

/** The parsed answer as a tree and whether it follows the schema. */
function structuredView(content: string, schemaText: string): HTMLElement {
  let value: unknown;
  try {
    value = JSON.parse(content);
  } catch (e) {
    return h('div', { class: 'verdict bad' }, `✗ The answer is not valid JSON: ${(e as Error).message}`);
  }
  let problems: string[];
  try {
    problems = validate(value, JSON.parse(schemaText) as Schema);
  } catch {
    problems = ['the schema itself does not parse'];
  }
  const verdict = problems.length === 0
    ? h('div', { class: 'verdict ok' }, '✓ Valid JSON that follows the schema')
    : h('div', { class: 'verdict bad' }, `✗ Does not follow the schema: ${problems.slice(0, 5).join('; ')}`);
  return h('div', {}, verdict, jsonTree(value));
}

function jsonTree(v: unknown): HTMLElement {
  if (Array.isArray(v)) return h('ol', { class: 'json', start: 0 }, ...v.map((x) => h('li', {}, jsonTree(x))));
  if (typeof v === 'object' && v !== null) {
    return h('ul', { class: 'json' }, ...Object.entries(v).map(([k, x]) => h('li', {}, h('span', { class: 'key' }, k), ': ', jsonTree(x))));
  }
  return h('span', { class: `json-${v === null ? 'null' : typeof v}` }, JSON.stringify(v));
}

function statsLine(s: MessageStats): HTMLElement[] {
  const item = (label: string, value: string | undefined, cls: string): HTMLElement | null =>
    value === undefined ? null : h('span', { class: `stat ${cls}`, title: label }, h('b', {}, label), ' ', value);
  const fmt = (v: number | undefined, digits: number, unit = ''): string | undefined => (v === undefined ? undefined : `${v.toFixed(digits)}${unit}`);
  return [
    item('prompt', fmt(s.prompt_tokens, 0), 's-prompt'),
    item('cached', fmt(s.cached_tokens, 0), 's-cached'),
    item('TTFT', fmt(s.ttft_ms, 0, ' ms'), 's-ttft'),
    item('speed', fmt(s.tokens_per_second, 1, ' tok/s'), 's-speed'),
    item('MTP accept', s.accept_length !== undefined ? fmt(s.accept_length, 2) : s.finish_reason ? '—' : undefined, 's-mtp'),
    item('finish', s.finish_reason, 's-finish'),
  ].filter((x): x is HTMLElement => x !== null);
}

/**
 * The message being streamed: text is appended as it arrives and the answer's Markdown is
 * redrawn at most once per frame. Until the first token it shows a waiting indicator with the
 * time elapsed; the reasoning block is open while the model thinks, with its elapsed time in
 * the summary, and folds once the answer starts (unless the user opened or closed it
 * themselves), then reads "Thought for 3.2 s · 57 tokens".
 */
export class LiveAnswer {
  private pending = false;
  private userToggled = false;
  private readonly sent = performance.now();
  private reasoningStart: number | null = null;
  private readonly ticker: ReturnType<typeof setInterval>;
  readonly el = assistantShell();

  constructor(private readonly m: AssistantMessage, private readonly onDraw: () => void) {
    const details = part(this.el, 'reasoning') as HTMLDetailsElement;
    details.open = true;
    details.querySelector('summary')!.addEventListener('click', () => (this.userToggled = true));
    this.el.classList.add('streaming');
    // the elapsed times move while nothing arrives
    this.ticker = setInterval(() => this.update(), 200);
    this.draw(this.clock());
  }

  private answering(): boolean {
    return this.m.content !== '' || (this.m.tool_calls?.length ?? 0) > 0;
  }

  private clock(): LiveClock {
    const now = performance.now();
    if (this.m.reasoning !== '' && this.reasoningStart === null) this.reasoningStart = now;
    if (this.reasoningStart !== null && this.m.reasoning_ms === undefined && this.answering()) this.m.reasoning_ms = now - this.reasoningStart;
    const nothingYet = this.m.reasoning === '' && !this.answering();
    return {
      waitingMs: nothingYet ? now - this.sent : null,
      thinkingMs: this.reasoningStart !== null && this.m.reasoning_ms === undefined ? now - this.reasoningStart : null,
    };
  }

  update(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      if (this.el.classList.contains('streaming')) this.draw(this.clock());
    });
  }

  private draw(clock: LiveClock | null): void {
    fillAssistant(this.el, this.m, clock);
    const details = part(this.el, 'reasoning') as HTMLDetailsElement;
    if (!this.userToggled && this.answering()) details.open = false;
    const calls = this.m.tool_calls ?? [];
    this.el.querySelectorAll('.tool-call').forEach((c) => c.remove());
    this.el.appendChild(toolCards(calls, new Set(), { edit() {}, regenerate() {}, toolResult() {} }, true));
    this.onDraw();
  }

  /** The answer ended (or was stopped): the reasoning's duration is final. */
  finish(): void {
    clearInterval(this.ticker);
    this.clock();
    if (this.reasoningStart !== null && this.m.reasoning_ms === undefined) this.m.reasoning_ms = performance.now() - this.reasoningStart;
    this.el.classList.remove('streaming');
    this.draw(null);
  }
}
