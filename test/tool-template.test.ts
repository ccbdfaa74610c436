// Tools on the prompt side: a Qwen-style XML tool template and a JSON one (fixtures written
// for these tests, in the shape of Qwen3.5's / Qwen3-Next's templates) render `tools`,
// assistant `tool_calls` and `tool` results; the call format is read off the template; a
// template without tool support (tiny-think's) gets the same information inlined as text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chatPrompt, toolSetup } from '../src/server/api/chat-prompt.js';
import { PromptFrontend } from '../src/frontend/frontend.js';
import type { ServerContext } from '../src/server/context.js';
import { parseAnswer } from '../src/server/api/answer.js';
import { callText, inlineTools, templateHandlesTools, toolFormatFor } from '../src/frontend/tool-prompt.js';
import type { FunctionTool } from '../src/server/api/tools/types.js';
import { type ChatMessage, renderChat } from '../src/frontend/chat-template.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';

const fixture = (name: string): string => readFileSync(join(REPO_ROOT, 'test', 'fixtures', name), 'utf8');
const XML = fixture('qwen-xml-tools.jinja');
const JSON_T = fixture('qwen-json-tools.jinja');

const TOOLS: FunctionTool[] = [{
  name: 'get_weather', description: 'Weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
}];
const HISTORY: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Weather in Oslo and Rome?' },
  {
    role: 'assistant', content: '', tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Oslo', days: 2 } } },
      { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: { city: 'Rome' } } },
    ],
  },
  { role: 'tool', content: 'cold', tool_call_id: 'call_1' },
  { role: 'tool', content: 'warm', tool_call_id: 'call_2' },
];
const templateTools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: TOOLS[0]!.parameters } }];

test('the call format is read off the template, else the model type', () => {
  assert.equal(toolFormatFor(XML, 'qwen3_next'), 'xml');
  assert.equal(toolFormatFor(JSON_T, 'qwen3_5_text'), 'json');
  assert.equal(toolFormatFor('{{ messages }}', 'qwen3_next'), 'json');
  assert.equal(toolFormatFor(undefined, 'qwen3_5_text'), 'xml');
  assert.ok(templateHandlesTools(XML) && templateHandlesTools(JSON_T));
  assert.ok(!templateHandlesTools(readTinyTemplate()));
});

test('XML tool template: tools in the system turn, calls as <function=…> blocks, results as one user turn', () => {
  const text = renderChat(XML, HISTORY, { addGenerationPrompt: true, extra: { tools: templateTools } });
  assert.ok(text.startsWith('<|im_start|>system\nBe brief.\n\n# Tools'));
  assert.ok(text.includes('<function>\n<name>get_weather</name>\n<description>Weather for a city</description>\n<parameters>\n<parameter>\n<name>city</name>\n<type>string</type>'));
  const calls = '<|im_start|>assistant\n' + callText('get_weather', { city: 'Oslo', days: 2 }, 'xml') + '\n' + callText('get_weather', { city: 'Rome' }, 'xml') + '<|im_end|>\n';
  assert.ok(text.includes(calls), text);
  assert.ok(text.includes('<|im_start|>user\n<tool_response>\ncold\n</tool_response>\n<tool_response>\nwarm\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n'));
  // what the template writes for a call is what the parser reads back
  const back = parseAnswer(callText('get_weather', { city: 'Oslo', days: 2 }, 'xml'), false, { tools: TOOLS, choice: { kind: 'auto' }, parallel: true, format: 'xml' });
  assert.deepEqual(JSON.parse(back.calls[0]!.call.arguments), { city: 'Oslo', days: 2 });
});

test('JSON tool template: tools as JSON lines, calls as {"name", "arguments"} objects', () => {
  const text = renderChat(JSON_T, HISTORY, { addGenerationPrompt: true, extra: { tools: templateTools } });
  // jinja's tojson writes Python-style separators
  assert.ok(text.includes('<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "parameters": {'), text);
  assert.ok(text.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call>\n<tool_call>'), text);
  assert.ok(text.endsWith('</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n'));
});

function readTinyTemplate(): string {
  const cfg = JSON.parse(readFileSync(join(TINY_THINK(), 'tokenizer_config.json'), 'utf8')) as { chat_template: string };
  return cfg.chat_template;
}

test('a template without tool support gets tools, calls and results inlined as text', () => {
  const msgs = inlineTools(HISTORY, TOOLS, 'xml');
  assert.equal(msgs[0]!.role, 'system');
  assert.ok(msgs[0]!.content.startsWith('Be brief.\n\n# Tools'));
  assert.ok(msgs[0]!.content.includes(JSON.stringify(templateTools[0])));
  assert.equal(msgs[2]!.content, `${callText('get_weather', { city: 'Oslo', days: 2 }, 'xml')}\n${callText('get_weather', { city: 'Rome' }, 'xml')}`);
  assert.deepEqual(msgs.slice(3), [{ role: 'user', content: '<tool_response>\ncold\n</tool_response>\n<tool_response>\nwarm\n</tool_response>' }]);
});

test('chatPrompt hands tools to a tool-aware template and inlines them otherwise', async () => {
  const tok = TextTokenizer.load(TINY_THINK());
  const ctxWith = (template: string | undefined, modelType: string): ServerContext => ({
    engine: {
      info: { frontend: new PromptFrontend(Object.assign(Object.create(tok) as TextTokenizer, { chatTemplate: template }), { vocabSize: 1000, maxContext: 4096, modelType }) },
      maxContext: 4096,
    },
  }) as unknown as ServerContext;
  const xmlCtx = ctxWith(XML, 'qwen3_5_text');
  const setup = toolSetup(xmlCtx, TOOLS, { kind: 'auto' }, true);
  assert.equal(setup?.format, 'xml');
  const p = await chatPrompt(xmlCtx, HISTORY, true, {}, setup);
  assert.equal(tok.decode(p.ids), renderChat(XML, HISTORY, { addGenerationPrompt: true, enableThinking: true, extra: { tools: templateTools, parallel_tool_calls: true } }));
  assert.ok(p.thinking);
  // tool_choice none: the tools are not offered
  const none = await chatPrompt(xmlCtx, HISTORY.slice(0, 2), true, {}, toolSetup(xmlCtx, TOOLS, { kind: 'none' }, true));
  assert.ok(!tok.decode(none.ids).includes('# Tools'));
  const tiny = ctxWith(readTinyTemplate(), 'qwen3_5_text');
  const q = await chatPrompt(tiny, HISTORY, false, {}, toolSetup(tiny, TOOLS, { kind: 'auto' }, true));
  assert.equal(tok.decode(q.ids), renderChat(readTinyTemplate(), inlineTools(HISTORY, TOOLS, 'xml'), { addGenerationPrompt: true, enableThinking: false }));
  assert.ok(!q.thinking);
});
