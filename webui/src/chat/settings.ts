// The settings panel: its fields are bound to a Settings object kept in localStorage, and
// requestBody() turns settings + conversation into a /v1/chat/completions body. Fields
// left empty use the server's defaults (the model's generation_config.json).
import { byId } from '../shared/dom.js';
import { apiMessages, type ImagePlan } from './history.js';
import { DEFAULT_SETTINGS, type Message, type Settings } from './types.js';

const KEY = 'deltaserve.settings';

type TextField = Exclude<keyof Settings, 'thinking'>;
const TEXT_FIELDS: Record<TextField, string> = {
  systemPrompt: 'set-system', temperature: 'set-temperature', topP: 'set-top-p', topK: 'set-top-k', minP: 'set-min-p',
  maxTokens: 'set-max-tokens', seed: 'set-seed', tools: 'set-tools', toolChoice: 'set-tool-choice', schema: 'set-schema', extra: 'set-extra',
};

export function loadSettings(): Settings {
  try {
    return { ...DEFAULT_SETTINGS, ...(JSON.parse(localStorage.getItem(KEY) ?? '{}') as Partial<Settings>) };
  } catch {
    return { ...DEFAULT_SETTINGS };
  }
}

/** Fill the panel from `s` and keep `s` (and localStorage) up to date as the user edits. */
export function bindSettings(s: Settings, onChange: () => void): void {
  const save = (): void => {
    localStorage.setItem(KEY, JSON.stringify(s));
    onChange();
  };
  for (const [field, id] of Object.entries(TEXT_FIELDS) as [TextField, string][]) {
    const el = byId<HTMLInputElement | HTMLTextAreaElement>(id);
    el.value = s[field];
    el.addEventListener('input', () => {
      s[field] = el.value;
      save();
    });
  }
  const think = byId<HTMLInputElement>('set-thinking');
  think.checked = s.thinking;
  think.addEventListener('change', () => {
    s.thinking = think.checked;
    save();
  });
  byId('set-reset').addEventListener('click', () => {
    Object.assign(s, DEFAULT_SETTINGS);
    for (const [field, id] of Object.entries(TEXT_FIELDS) as [TextField, string][]) byId<HTMLInputElement>(id).value = s[field];
    think.checked = s.thinking;
    save();
  });
}

function parseJsonField(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${what} is not valid JSON: ${(e as Error).message}`);
  }
}

/** The tools list of the settings (OpenAI function tools; bare {name, parameters} are wrapped). */
export function toolsOf(s: Settings): Record<string, unknown>[] {
  if (s.tools.trim() === '') return [];
  const list = parseJsonField(s.tools, 'Tools');
  if (!Array.isArray(list)) throw new Error('Tools must be a JSON list of functions');
  return list.map((t: unknown, i) => {
    const o = t as Record<string, unknown> | null;
    if (typeof o !== 'object' || o === null) throw new Error(`Tools[${i}] must be an object`);
    return o['type'] === 'function' ? o : { type: 'function', function: o };
  });
}

export function schemaOf(s: Settings): Record<string, unknown> | null {
  if (s.schema.trim() === '') return null;
  const schema = parseJsonField(s.schema, 'The JSON schema');
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) throw new Error('The JSON schema must be an object');
  return schema as Record<string, unknown>;
}

function num(text: string, what: string, integer = false): number | undefined {
  if (text.trim() === '') return undefined;
  const v = Number(text);
  if (!Number.isFinite(v) || (integer && !Number.isInteger(v))) throw new Error(`${what} must be ${integer ? 'an integer' : 'a number'} (got "${text}")`);
  return v;
}

/** The request body, images as `plan` says (history.ts); throws a message naming the setting at fault. */
export function requestBody(s: Settings, messages: readonly Message[], plan: ImagePlan | null = null): Record<string, unknown> {
  const body: Record<string, unknown> = { messages: apiMessages(s.systemPrompt, messages, plan) };
  const put = (k: string, v: unknown): void => {
    if (v !== undefined) body[k] = v;
  };
  put('temperature', num(s.temperature, 'Temperature'));
  put('top_p', num(s.topP, 'Top-p'));
  put('top_k', num(s.topK, 'Top-k', true));
  put('min_p', num(s.minP, 'Min-p'));
  put('max_tokens', num(s.maxTokens, 'Max tokens', true));
  put('seed', num(s.seed, 'Seed', true));
  if (!s.thinking) body['chat_template_kwargs'] = { enable_thinking: false };
  const tools = toolsOf(s);
  if (tools.length > 0) {
    body['tools'] = tools;
    const choice = s.toolChoice.trim() || 'auto';
    body['tool_choice'] = ['auto', 'none', 'required'].includes(choice) ? choice : { type: 'function', function: { name: choice } };
  }
  const schema = schemaOf(s);
  if (schema) body['response_format'] = { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } };
  if (s.extra.trim() !== '') {
    const extra = parseJsonField(s.extra, 'Extra request fields');
    if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) throw new Error('Extra request fields must be a JSON object');
    Object.assign(body, extra);
  }
  return body;
}
