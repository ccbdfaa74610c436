// The chat turns of the frontend golden test (frontend-golden.test.ts): message lists with
// and without tools and tool history, thinking on and off, under a tool-aware template (XML
// and JSON call styles) and one without tool support (tools inlined). Shared by the test and
// by the script that recorded the goldens from the server's prompt path before the frontend
// existed (see the test's header).
import type { ChatMessage } from '../src/frontend/chat-template.js';
import type { FunctionTool, ToolChoice } from '../src/server/api/tools/types.js';

export type GoldenTemplate = 'tiny' | 'xml' | 'json';

export interface GoldenCase {
  readonly name: string;
  readonly template: GoldenTemplate;
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly FunctionTool[];
  readonly choice: ToolChoice;
  readonly think: boolean;
  readonly kwargs: Record<string, unknown>;
}

/** What the prompt path produced for a case. */
export interface GoldenPrompt {
  readonly ids: readonly number[];
  readonly boundaries: readonly number[];
  readonly thinking: boolean;
  readonly thinkStart: string;
}

const WEATHER: FunctionTool = {
  name: 'get_weather', description: 'Weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
};
const CLOCK: FunctionTool = { name: 'now', parameters: { type: 'object', properties: {} } };

const PLAIN: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'What is 12 + 30?' },
  { role: 'assistant', content: '42.' },
  { role: 'user', content: 'And 2 + 2?' },
];

const TOOL_HISTORY: ChatMessage[] = [
  { role: 'system', content: 'Use tools when they help.' },
  { role: 'user', content: 'Weather in Oslo and Rome?' },
  {
    role: 'assistant', content: '',
    tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Oslo', days: 2 } } },
      { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: { city: 'Rome' } } },
    ],
  },
  { role: 'tool', content: 'cold', tool_call_id: 'call_1' },
  { role: 'tool', content: 'warm', tool_call_id: 'call_2' },
  { role: 'user', content: 'Thanks. What time is it?' },
];

const AUTO: ToolChoice = { kind: 'auto' };

export const GOLDEN_CASES: readonly GoldenCase[] = [
  { name: 'one user message, thinking on', template: 'tiny', messages: PLAIN.slice(1, 2), tools: [], choice: AUTO, think: true, kwargs: {} },
  { name: 'four messages, thinking off', template: 'tiny', messages: PLAIN, tools: [], choice: AUTO, think: false, kwargs: {} },
  { name: 'four messages, thinking on, xml template', template: 'xml', messages: PLAIN, tools: [], choice: AUTO, think: true, kwargs: {} },
  { name: 'tools inlined (no tool support), tool history, thinking on', template: 'tiny', messages: TOOL_HISTORY, tools: [WEATHER, CLOCK], choice: AUTO, think: true, kwargs: {} },
  { name: 'tools inlined, tool_choice none, thinking off', template: 'tiny', messages: TOOL_HISTORY, tools: [WEATHER, CLOCK], choice: { kind: 'none' }, think: false, kwargs: {} },
  { name: 'xml tool template, tool history, thinking on', template: 'xml', messages: TOOL_HISTORY, tools: [WEATHER, CLOCK], choice: AUTO, think: true, kwargs: {} },
  { name: 'xml tool template, required tool, thinking off', template: 'xml', messages: PLAIN, tools: [WEATHER], choice: { kind: 'required' }, think: false, kwargs: {} },
  { name: 'json tool template, tool history, thinking on', template: 'json', messages: TOOL_HISTORY, tools: [CLOCK, WEATHER], choice: AUTO, think: true, kwargs: {} },
  { name: 'json tool template, no tools, kwargs, thinking off', template: 'json', messages: PLAIN, tools: [], choice: AUTO, think: false, kwargs: { enable_thinking: false } },
];
