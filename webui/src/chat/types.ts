// The conversation model kept in IndexedDB and exported as JSON.

export interface ToolCall {
  readonly id: string;
  readonly name: string;
  /** The JSON text the model wrote. */
  readonly arguments: string;
}

/** Per-answer measurements: token counts from the server's usage, times measured here. */
export interface MessageStats {
  prompt_tokens?: number;
  cached_tokens?: number;
  completion_tokens?: number;
  /** ms from sending the request to the first streamed token. */
  ttft_ms?: number;
  /** completion tokens / seconds from the first to the last token. */
  tokens_per_second?: number;
  /** MTP: tokens per verify round (absent when no speculation ran). */
  accept_length?: number;
  finish_reason?: string;
}

/** An image attached to a user message, kept as its data: URL (what the API is sent). */
export interface ImageAttachment {
  /** `data:image/...;base64,...` */
  readonly url: string;
  /** The file's name (or "pasted image"): the thumbnail's alt text. */
  readonly name: string;
}

export type Message =
  | { role: 'user'; content: string; images?: ImageAttachment[] }
  | {
    role: 'assistant';
    content: string;
    reasoning: string;
    tool_calls?: ToolCall[];
    stats?: MessageStats;
    error?: string;
    /** The JSON schema the answer was asked to follow (structured output), as text. */
    schema?: string;
    /** ms from the first reasoning text to the first answer text (or the end). */
    reasoning_ms?: number;
    /** Streamed reasoning chunks: the server sends one per generated token. */
    reasoning_tokens?: number;
  }
  | { role: 'tool'; tool_call_id: string; name: string; content: string };

export type AssistantMessage = Extract<Message, { role: 'assistant' }>;

export interface Conversation {
  id: string;
  title: string;
  created: number;
  updated: number;
  messages: Message[];
  /** Images (in conversation order) before this index are no longer sent: set when the
   * prompt was over the model's context with them (history.ts). Absent: 0. */
  imagesFrom?: number;
}

export interface Settings {
  systemPrompt: string;
  temperature: string;
  topP: string;
  topK: string;
  minP: string;
  maxTokens: string;
  seed: string;
  thinking: boolean;
  /** A JSON list of OpenAI function tools (empty: none). */
  tools: string;
  /** auto | none | required | the name of one tool. */
  toolChoice: string;
  /** A JSON schema for the answer (empty: free text). */
  schema: string;
  /** A JSON object of further request fields (logit_bias, stop, …) merged into the request. */
  extra: string;
}

export const DEFAULT_SETTINGS: Settings = {
  systemPrompt: '', temperature: '', topP: '', topK: '', minP: '', maxTokens: '', seed: '',
  thinking: true, tools: '', toolChoice: 'auto', schema: '', extra: '',
};
