// Tool-call parsing of model-style outputs in both Qwen formats (XML: Qwen3.5, JSON:
// Qwen3-Next): the at-once result on a fixture, and streaming with the text split at every
// UTF-8 byte position (decoded as a streaming detokenizer would) giving the same parts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type AnswerPart, AnswerStream, parseAnswer } from '../src/server/api/answer.js';
import { parseToolCalls, ToolCallParser, xmlValue } from '../src/server/api/tools/parser.js';
import type { FunctionTool, ToolSetup } from '../src/server/api/tools/types.js';

const TOOLS: FunctionTool[] = [
  {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer' }, metric: { type: 'boolean' }, extra: { type: 'object' } },
      required: ['city'],
    },
  },
  { name: 'search', parameters: { type: 'object', properties: { query: { type: 'string' }, limit: { type: ['number', 'null'] } } } },
];

interface Case {
  name: string;
  thinking: boolean;
  format: 'xml' | 'json';
  text: string;
  reasoning: string | null;
  content: string;
  calls: { name: string; args: unknown }[];
}

// Recorded-style outputs: what Qwen3.5 (XML) and Qwen3-Next (JSON) write after `<think>\n`.
const CASES: Case[] = [
  {
    name: 'xml: reasoning then one call with typed values',
    thinking: true, format: 'xml',
    text: 'The user wants the weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n' +
      '<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n<parameter=extra>\n{"a": [1, 2]}\n</parameter>\n</function>\n</tool_call>',
    reasoning: 'The user wants the weather.\n', content: '',
    calls: [{ name: 'get_weather', args: { city: 'São Paulo', days: 3, metric: true, extra: { a: [1, 2] } } }],
  },
  {
    name: 'xml: text before two parallel calls; multi-line string value kept',
    thinking: false, format: 'xml',
    text: 'Let me look both up.\n\n<tool_call>\n<function=search>\n<parameter=query>\nline one\nline two\n</parameter>\n<parameter=limit>\nnull\n</parameter>\n</function>\n</tool_call>\n' +
      '<tool_call>\n<function=get_weather>\n<parameter=city>\n 42 \n</parameter>\n</function>\n</tool_call>\n',
    reasoning: null, content: 'Let me look both up.',
    calls: [{ name: 'search', args: { query: 'line one\nline two', limit: null } }, { name: 'get_weather', args: { city: ' 42 ' } }],
  },
  {
    name: 'json: reasoning then a call',
    thinking: true, format: 'json',
    text: 'Need weather.</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call>',
    reasoning: 'Need weather.', content: '',
    calls: [{ name: 'get_weather', args: { city: 'Oslo', days: 2 } }],
  },
  {
    name: 'json: two calls, the text between them dropped (whitespace only)',
    thinking: false, format: 'json',
    text: '<tool_call>\n{"name": "search", "arguments": {"query": "a<b"}}\n</tool_call>\n\n<tool_call>\n{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}\n</tool_call>',
    reasoning: null, content: '',
    calls: [{ name: 'search', args: { query: 'a<b' } }, { name: 'search', args: { query: 'x' } }],
  },
  {
    name: 'malformed: bad JSON body is text, the next call still parses',
    thinking: false, format: 'json',
    text: 'Hi <tool_call>{"name": "search", "arguments": {"query": }</tool_call> then <tool_call>{"name":"search","arguments":{}}</tool_call>',
    reasoning: null, content: 'Hi <tool_call>{"name": "search", "arguments": {"query": }</tool_call> then',
    calls: [{ name: 'search', args: {} }],
  },
  {
    name: 'malformed: unknown function and a cut call are text',
    thinking: false, format: 'xml',
    text: '<tool_call>\n<function=nope>\n</function>\n</tool_call> and <tool_call>\n<function=search>\n<parameter=query>\nunfinish',
    reasoning: null,
    content: '<tool_call>\n<function=nope>\n</function>\n</tool_call> and <tool_call>\n<function=search>\n<parameter=query>\nunfinish',
    calls: [],
  },
  {
    name: 'plain text with a partial tag at the end and no calls',
    thinking: false, format: 'xml',
    text: 'The answer is 42 <tool_ca',
    reasoning: null, content: 'The answer is 42 <tool_ca', calls: [],
  },
];

const setup = (format: 'xml' | 'json'): ToolSetup => ({ tools: TOOLS, choice: { kind: 'auto' }, parallel: true, format });

function summarize(parts: AnswerPart[], hasReasoning: boolean): { reasoning: string | null; content: string; calls: { name: string; args: unknown }[] } {
  let reasoning = '';
  let content = '';
  const calls: { name: string; args: unknown }[] = [];
  for (const p of parts) {
    if (p.type === 'reasoning') reasoning += p.text;
    else if (p.type === 'content') content += p.text;
    else if (p.type === 'tool_call') calls.push({ name: p.call.name, args: JSON.parse(p.call.arguments) });
    else assert.fail(`an at-once stream gives no ${p.type} part`);
  }
  return { reasoning: hasReasoning ? reasoning : null, content, calls };
}

for (const c of CASES) {
  test(`tool parser at once: ${c.name}`, () => {
    const a = parseAnswer(c.text, c.thinking, setup(c.format));
    assert.equal(a.reasoning, c.reasoning);
    assert.equal(a.content, c.content);
    assert.deepEqual(a.calls.map((x) => ({ name: x.call.name, args: JSON.parse(x.call.arguments) })), c.calls);
    for (const x of a.calls) assert.match(x.id, /^call_[0-9a-f]{24}$/);
  });

  test(`tool parser streaming == at once at every byte split: ${c.name}`, () => {
    const bytes = Buffer.from(c.text, 'utf8');
    const whole = parseAnswer(c.text, c.thinking, setup(c.format));
    const expected = { reasoning: whole.reasoning, content: whole.content, calls: whole.calls.map((x) => ({ name: x.call.name, args: JSON.parse(x.call.arguments) })) };
    for (let cut = 0; cut <= bytes.length; cut++) {
      const dec = new TextDecoder();
      const s = new AnswerStream(c.thinking, setup(c.format));
      const parts = [...s.push(dec.decode(bytes.subarray(0, cut), { stream: true })), ...s.push(dec.decode(bytes.subarray(cut))), ...s.flush()];
      assert.deepEqual(summarize(parts, s.hasReasoning), expected, `split at byte ${cut}`);
    }
    // one character at a time
    const s = new AnswerStream(c.thinking, setup(c.format));
    const parts = [...[...c.text].flatMap((ch) => s.push(ch)), ...s.flush()];
    assert.deepEqual(summarize(parts, s.hasReasoning), expected, 'char by char');
  });
}

test('tool parser: a call is emitted as soon as its closing tag arrives (not held to the end)', () => {
  const p = new ToolCallParser('json', TOOLS);
  assert.deepEqual(p.push('<tool_call>{"name":"search","arguments":{}}'), []);
  const ev = p.push('</tool_call>');
  assert.equal(ev.length, 1);
  assert.equal(ev[0]!.type, 'call');
  assert.deepEqual(p.flush(), []);
});

test('tool parser: tool_choice none parses nothing; parallel_tool_calls false keeps the first call', () => {
  const text = '<tool_call>{"name":"search","arguments":{"query":"a"}}</tool_call><tool_call>{"name":"search","arguments":{"query":"b"}}</tool_call>';
  const none = parseAnswer(text, false, { ...setup('json'), choice: { kind: 'none' } });
  assert.equal(none.calls.length, 0);
  assert.equal(none.content, text);
  const single = parseAnswer(text, false, { ...setup('json'), parallel: false });
  assert.deepEqual(single.calls.map((c) => JSON.parse(c.call.arguments)), [{ query: 'a' }]);
  assert.equal(parseToolCalls(text, 'json', TOOLS).calls.length, 2);
});

test('xml values convert to the schema type, else stay text', () => {
  assert.equal(xmlValue('12', { type: 'integer' }), 12);
  assert.equal(xmlValue('1.5', { type: 'integer' }), '1.5');
  assert.equal(xmlValue('1.5', { type: 'number' }), 1.5);
  assert.equal(xmlValue('yes', { type: 'boolean' }), 'yes');
  assert.equal(xmlValue('false', { type: 'boolean' }), false);
  assert.deepEqual(xmlValue('[1,"a"]', { type: 'array' }), [1, 'a']);
  assert.equal(xmlValue('{"a":1}', { type: 'array' }), '{"a":1}');
  assert.equal(xmlValue('12', { type: 'string' }), '12');
  assert.equal(xmlValue('12', undefined), '12');
  assert.equal(xmlValue('7', { anyOf: [{ type: 'integer' }, { type: 'null' }] }), 7);
  assert.equal(xmlValue('2', { enum: [1, 2] }), 2);
});
