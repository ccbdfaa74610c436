// A small Markdown renderer that builds DOM nodes: text only ever becomes text nodes, so a
// model's HTML (<script>, <img onerror=…>, …) is shown as text and never parsed or run.
// Blocks: fenced code (```lang), headings, blockquotes, bullet / numbered lists, tables,
// horizontal rules, paragraphs; code is highlighted by highlight.ts (text nodes in spans). Inline: `code`, **bold**, *italic* / _italic_, ~~strike~~,
// [links](http…) (http/https/mailto only, opened in a new tab without referrer).
import { append, h, type Child } from '../shared/dom.js';
import { highlight } from './highlight.js';

/** Render `src` into a fragment. An unclosed fence (mid-stream) renders as code so far. */
export function renderMarkdown(src: string): DocumentFragment {
  const frag = document.createDocumentFragment();
  const lines = src.replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = /^\s*(```+|~~~+)\s*([\w+#.-]*)/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trim().startsWith(fence[1]!)) body.push(lines[i++]!);
      i++; // the closing fence
      frag.appendChild(codeBlock(body.join('\n'), fence[2] ?? ''));
      continue;
    }
    if (line.trim() === '') {
      i++;
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      const level = Math.min(heading[1]!.length + 2, 6); // # → h3: the page has its own h1/h2
      frag.appendChild(h(`h${level}` as 'h3', {}, ...inline(heading[2]!)));
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      frag.appendChild(h('hr'));
      i++;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i]!)) quoted.push(lines[i++]!.replace(/^\s*>\s?/, ''));
      frag.appendChild(h('blockquote', {}, renderMarkdown(quoted.join('\n'))));
      continue;
    }
    if (LIST_ITEM.test(line)) {
      i = list(lines, i, frag);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/.test(lines[i + 1]!)) {
      i = table(lines, i, frag);
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && lines[i]!.trim() !== '' && !startsBlock(lines[i]!)) para.push(lines[i++]!);
    if (para.length === 0) para.push(lines[i++]!);
    const p = h('p');
    para.forEach((l, j) => {
      if (j > 0) p.appendChild(h('br'));
      append(p, ...inline(l));
    });
    frag.appendChild(p);
  }
  return frag;
}

const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;

function startsBlock(line: string): boolean {
  return /^\s*(```|~~~|#{1,6}\s|>)/.test(line) || LIST_ITEM.test(line);
}

/** A list starting at line `i` (nested by indentation); returns the next line index. */
function list(lines: string[], i: number, into: Node): number {
  const first = LIST_ITEM.exec(lines[i]!)!;
  const indent = first[1]!.length;
  const ordered = /\d/.test(first[2]!);
  const start = ordered ? parseInt(first[2]!, 10) : 1;
  const el = ordered ? h('ol', start !== 1 ? { start } : {}) : h('ul');
  let li: HTMLLIElement | null = null;
  while (i < lines.length) {
    const line = lines[i]!;
    const m = LIST_ITEM.exec(line);
    if (m && m[1]!.length === indent) {
      li = h('li', {}, ...inline(m[3]!));
      el.appendChild(li);
      i++;
    } else if (m && m[1]!.length > indent && li) {
      i = list(lines, i, li);
    } else if (line.trim() !== '' && /^\s+/.test(line) && li) {
      append(li, ' ', ...inline(line.trim()));
      i++;
    } else break;
  }
  into.appendChild(el);
  return i;
}

function cells(line: string): string[] {
  return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
}

function table(lines: string[], i: number, into: Node): number {
  const head = cells(lines[i]!);
  const rows: string[][] = [];
  i += 2;
  while (i < lines.length && lines[i]!.includes('|') && lines[i]!.trim() !== '') rows.push(cells(lines[i++]!));
  into.appendChild(h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...head.map((c) => h('th', {}, ...inline(c))))),
    h('tbody', {}, ...rows.map((r) => h('tr', {}, ...head.map((_, j) => h('td', {}, ...inline(r[j] ?? '')))))))));
  return i;
}

function codeBlock(code: string, lang: string): HTMLElement {
  const copy = h('button', { class: 'copy', type: 'button', title: 'Copy code' }, 'copy');
  copy.addEventListener('click', () => {
    void navigator.clipboard?.writeText(code).then(() => (copy.textContent = 'copied'), () => (copy.textContent = 'copy failed'));
  });
  return h('div', { class: 'code' }, h('div', { class: 'code-head' }, h('span', {}, lang || 'code'), copy),
    h('pre', {}, h('code', lang ? { 'data-lang': lang } : {}, ...highlight(code, lang))));
}

/** Links that may be followed: absolute http(s) and mailto only (no javascript:, data:, …). */
export function safeHref(url: string): string | null {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'mailto:' ? u.href : null;
  } catch {
    return null;
  }
}

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*(.+?)\*\*|__(.+?)__|~~(.+?)~~|\*([^*\s](?:.*?[^*\s])?)\*|\b_([^_\s](?:.*?[^_\s])?)_\b|\[([^\]]+)\]\(([^)\s]+)\)|<?(https?:\/\/[^\s<>)]+[^\s<>).,;:!?'"])>?/;

/** Inline spans of one line of text. */
export function inline(text: string): Child[] {
  const out: Child[] = [];
  let rest = text;
  while (rest.length > 0) {
    const m = INLINE.exec(rest);
    if (!m) {
      out.push(rest);
      break;
    }
    if (m.index > 0) out.push(rest.slice(0, m.index));
    out.push(span(m));
    rest = rest.slice(m.index + m[0].length);
  }
  return out;
}

function span(m: RegExpExecArray): Child {
  if (m[1] !== undefined) return h('code', {}, m[2]!.trim() === '' ? m[2]! : m[2]!.replace(/^ (.*) $/, '$1'));
  if (m[3] !== undefined || m[4] !== undefined) return h('strong', {}, ...inline(m[3] ?? m[4]!));
  if (m[5] !== undefined) return h('del', {}, ...inline(m[5]));
  if (m[6] !== undefined || m[7] !== undefined) return h('em', {}, ...inline(m[6] ?? m[7]!));
  const label = m[8];
  const url = m[9] ?? m[10]!;
  const href = safeHref(url);
  if (href === null) return label !== undefined ? `[${label}](${url})` : url;
  return h('a', { href, target: '_blank', rel: 'noopener noreferrer nofollow' }, ...(label !== undefined ? inline(label) : [url]));
}
