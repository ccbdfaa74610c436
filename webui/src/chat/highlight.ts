// Syntax highlighting for fenced code blocks, with Prism's tokenizer (prismjs): Prism only
// splits the code into typed tokens here, and every token becomes a text node inside a
// <span class="tok-TYPE">, so code is never parsed as HTML (the page's text-only rule holds).
// Languages: the common ones a model writes; anything else stays plain text.
import Prism from 'prismjs';
import 'prismjs/components/prism-clike.js';
import 'prismjs/components/prism-c.js';
import 'prismjs/components/prism-cpp.js';
import 'prismjs/components/prism-javascript.js';
import 'prismjs/components/prism-typescript.js';
import 'prismjs/components/prism-python.js';
import 'prismjs/components/prism-bash.js';
import 'prismjs/components/prism-json.js';
import 'prismjs/components/prism-rust.js';
import 'prismjs/components/prism-go.js';
import 'prismjs/components/prism-java.js';
import 'prismjs/components/prism-sql.js';
import 'prismjs/components/prism-yaml.js';
import 'prismjs/components/prism-diff.js';
import 'prismjs/components/prism-markup.js';
import 'prismjs/components/prism-css.js';
import { h } from '../shared/dom.js';

/** Fence names people write → Prism's language names. */
const ALIASES: Readonly<Record<string, string>> = {
  js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'javascript', ts: 'typescript', tsx: 'typescript',
  py: 'python', python3: 'python', sh: 'bash', shell: 'bash', zsh: 'bash', console: 'bash', 'c++': 'cpp', cc: 'cpp', h: 'c',
  rs: 'rust', golang: 'go', yml: 'yaml', html: 'markup', xml: 'markup', svg: 'markup', patch: 'diff', jsonc: 'json',
};

/** The Prism grammar for a fence's language tag, if it is one we highlight. */
function grammarOf(lang: string): Prism.Grammar | undefined {
  const name = lang.toLowerCase();
  const key = ALIASES[name] ?? name;
  return Object.prototype.hasOwnProperty.call(Prism.languages, key) ? Prism.languages[key] : undefined;
}

/** `code` as DOM nodes: plain text, or highlighted tokens when `lang` is known. */
export function highlight(code: string, lang: string): Node[] {
  const grammar = grammarOf(lang);
  if (!grammar) return [document.createTextNode(code)];
  return Prism.tokenize(code, grammar).map(toNode);
}

function toNode(t: string | Prism.Token): Node {
  if (typeof t === 'string') return document.createTextNode(t);
  const classes = ['tok', `tok-${t.type}`, ...(Array.isArray(t.alias) ? t.alias : t.alias ? [t.alias] : []).map((a) => `tok-${a}`)];
  const span = h('span', { class: classes.join(' ') });
  const content = Array.isArray(t.content) ? t.content : [t.content];
  for (const c of content) span.appendChild(toNode(c));
  return span;
}
