// Public library entry point.
export { Engine, type EngineOptions } from './engine/engine.js';
export { BUILTIN_MODEL } from './hub/builtin.js';
export type { EngineRequest, GenerateRequest, RequestParams } from './engine/request-builder.js';
export type { EngineInfo } from './engine/info.js';
export { PromptFrontend } from './frontend/frontend.js';
export type { PreparedPrompt, PromptInput } from './frontend/prompt.js';
export type { ChatMessage } from './frontend/chat-template.js';
export type { GenerateEvent, Usage } from './engine/request.js';
export type { EngineStats } from './engine/metrics.js';
export { DeltaserveError } from './util/errors.js';
export { loadModel, type Model } from './model/model.js';
export { loadModelConfig, type ModelConfig } from './model/config.js';
export { TextTokenizer } from './tokenizer/tokenizer.js';
