// Tool-call arguments streamed while generated: AnswerStream's incremental
// mode over recorded-style outputs, split at every UTF-8 byte and fed char by char. Each
// started call's fragments join to exactly the arguments it ends with, which parse to the
// at-once call; fragments arrive before the call closes; a call that breaks after it started
// ends with tool_call_fail; a call that never started is text as at once. previewCall is monotone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type AnswerPart, AnswerStream, parseAnswer } from '../src/server/api/answer.js';
import { CALL_CLOSE } from '../src/server/api/tools/parser.js';
import { previewCall } from '../src/server/api/tools/stream-args.js';
import type { FunctionTool, ToolFormat, ToolSetup } from '../src/server/api/tools/types.js';

const TOOLS: FunctionTool[] = [
  {
    name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' }, extra: { type: 'object' }, note: { type: ['string', 'null'] } } },
  },
  { name: 'search', parameters: { type: 'object', properties: { query: { type: 'string' } } } },
];
const BY_NAME = new Map(TOOLS.map((t) => [t.name, t]));

interface Case {
  readonly name: string;
  readonly format: ToolFormat;
  readonly text: string;
  /** Calls that complete; `failed` calls that start and then break. */
  readonly calls: number;
  readonly failed: number;
  /** The broken call closes: it starts only when the text is split between the end of this
   * header and its `</tool_call>` (in one piece it never starts, and is text). */
  readonly brokenHeader?: string;
}

const CASES: Case[] = [
  {
    name: 'xml: escapes, unicode, newlines and typed values', format: 'xml', calls: 1, failed: 0,
    text: 'Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSão "Paulo" \\ 😀\nline 2\n</parameter>\n<parameter=days>\n3\n</parameter>\n' +
      '<parameter=extra>\n{"a": [1, 2]}\n</parameter>\n<parameter=note>\nnull\n</parameter>\n</function>\n</tool_call>',
  },
  {
    name: 'xml: two calls, the second with no parameters', format: 'xml', calls: 2, failed: 0,
    text: '<tool_call>\n<function=search>\n<parameter=query>\na</parb\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=search>\n</function>\n</tool_call>',
  },
  {
    name: 'json: spaced arguments stream as written; a string-encoded one comes whole', format: 'json', calls: 2, failed: 0,
    text: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo }", "days": 2, "extra": {"k": {}} }}\n</tool_call>\n' +
      '<tool_call>\n{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}\n</tool_call>',
  },
  {
    name: 'json: keys in the other order are sent whole at the close', format: 'json', calls: 1, failed: 0,
    text: '<tool_call>{"arguments": {"query": "q"}, "name": "search"}</tool_call>',
  },
  {
    name: 'xml: a duplicated parameter breaks a started call; an unknown function is text', format: 'xml', calls: 0, failed: 1, brokenHeader: '<function=search>',
    text: '<tool_call>\n<function=search>\n<parameter=query>\na\n</parameter>\n<parameter=query>\nb\n</parameter>\n</function>\n</tool_call> then ' +
      '<tool_call>\n<function=nope>\n</function>\n</tool_call>',
  },
  {
    name: 'json: a call cut short', format: 'json', calls: 0, failed: 1,
    text: 'ok <tool_call>\n{"name": "search", "arguments": {"query": "unfin',
  },
];

const setup = (format: ToolFormat): ToolSetup => ({ tools: TOOLS, choice: { kind: 'auto' }, parallel: true, format });

interface Streamed {
  content: string;
  calls: { name: string; args: string }[];
  failed: number;
  /** Fragments per started call. */
  fragments: number[];
}

/** Fold incremental parts, checking each call's fragments join to its final arguments. */
function fold(parts: AnswerPart[]): Streamed {
  const out: Streamed = { content: '', calls: [], failed: 0, fragments: [] };
  const open = new Map<string, { name: string; sent: string; n: number }>();
  for (const p of parts) {
    if (p.type === 'content') out.content += p.text;
    else if (p.type === 'tool_call_start') open.set(p.id, { name: p.name, sent: '', n: 0 });
    else if (p.type === 'tool_call_delta') {
      const o = open.get(p.id)!;
      o.sent += p.text;
      o.n++;
    } else if (p.type === 'tool_call') {
      const o = open.get(p.id);
      assert.ok(o, 'a call ends only after it started');
      assert.equal(o.sent, p.call.arguments, 'the fragments join to the arguments');
      assert.equal(o.name, p.call.name);
      out.calls.push({ name: p.call.name, args: p.call.arguments });
      out.fragments.push(o.n);
      open.delete(p.id);
    } else if (p.type === 'tool_call_fail') {
      assert.ok(open.delete(p.id));
      out.failed++;
    }
  }
  assert.equal(open.size, 0, 'every started call ends');
  return out;
}

/** Whether the broken call of `c` starts when the text is split at byte `cut`. */
function startsBroken(c: Case, cut: number): boolean {
  if (!c.brokenHeader) return true;
  const bytes = (chars: number): number => Buffer.byteLength(c.text.slice(0, chars));
  const header = c.text.indexOf(c.brokenHeader) + c.brokenHeader.length;
  const close = c.text.indexOf(CALL_CLOSE, header) + CALL_CLOSE.length;
  return cut >= bytes(header) && cut < bytes(close);
}

for (const c of CASES) {
  test(`incremental calls at every byte split: ${c.name}`, () => {
    const whole = parseAnswer(c.text, false, setup(c.format));
    const bytes = Buffer.from(c.text, 'utf8');
    for (let cut = 0; cut <= bytes.length; cut++) {
      const dec = new TextDecoder();
      const s = new AnswerStream(false, setup(c.format), 'call_', true);
      const got = fold([...s.push(dec.decode(bytes.subarray(0, cut), { stream: true })), ...s.push(dec.decode(bytes.subarray(cut))), ...s.flush()]);
      assert.equal(got.calls.length, c.calls, `split ${cut}`);
      assert.equal(got.failed, startsBroken(c, cut) ? c.failed : 0, `split ${cut}`);
      assert.deepEqual(got.calls.map((x) => [x.name, JSON.parse(x.args)]), whole.calls.map((x) => [x.call.name, JSON.parse(x.call.arguments)]), `split ${cut}`);
      if (got.failed === 0) assert.equal(got.content, whole.content, `split ${cut}`);
      assert.equal(s.callCount, c.calls);
    }
  });

  test(`incremental calls char by char send fragments before the close: ${c.name}`, () => {
    const s = new AnswerStream(false, setup(c.format), 'call_', true);
    const parts: AnswerPart[] = [];
    let firstDeltaAt = -1;
    [...c.text].forEach((ch, i) => {
      const p = s.push(ch);
      if (firstDeltaAt < 0 && p.some((x) => x.type === 'tool_call_delta')) firstDeltaAt = i;
      parts.push(...p);
    });
    parts.push(...s.flush());
    const got = fold(parts);
    const whole = parseAnswer(c.text, false, setup(c.format));
    // at once, arguments are the same text
    assert.deepEqual(got.calls.map((x) => x.args), whole.calls.map((x) => x.call.arguments));
    if (got.calls.length > 0 && c.name.startsWith('xml: escapes')) {
      assert.ok(firstDeltaAt >= 0 && firstDeltaAt < c.text.indexOf('</parameter>'), `the value streams: first fragment at ${firstDeltaAt}`);
      assert.ok(got.fragments[0]! > 10, `${got.fragments[0]} fragments`);
    }
  });
}

test('previewCall is monotone over every prefix of every case', () => {
  for (const c of CASES) {
    let body: string | null = null;
    let last = '';
    for (let i = 0; i <= c.text.length; i++) {
      const prefix = c.text.slice(0, i);
      const open = prefix.lastIndexOf('<tool_call>');
      const b = open >= 0 && !prefix.slice(open).includes(CALL_CLOSE) ? prefix.slice(open + '<tool_call>'.length) : null;
      if (b === null) {
        body = null;
        last = '';
        continue;
      }
      if (body === null) last = '';
      body = b;
      const p = previewCall(b, c.format, BY_NAME, CALL_CLOSE);
      if (!p) continue;
      if (c.failed === 0) assert.ok(p.args.startsWith(last), `${c.name} @${i}: ${JSON.stringify(last)} → ${JSON.stringify(p.args)}`);
      last = p.args;
    }
  }
});

test('parallel_tool_calls false: a second call neither starts nor ends', () => {
  const text = '<tool_call>{"name":"search","arguments":{"query":"a"}}</tool_call><tool_call>{"name":"search","arguments":{"query":"b"}}</tool_call>';
  const s = new AnswerStream(false, { ...setup('json'), parallel: false }, 'call_', true);
  const got = fold([...[...text].flatMap((ch) => s.push(ch)), ...s.flush()]);
  assert.deepEqual(got.calls.map((c) => JSON.parse(c.args)), [{ query: 'a' }]);
  assert.equal(got.content, '');
});
