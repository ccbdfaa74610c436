// OpenAI-compatible HTTP server over an Engine.
export { startServer, type RunningServer, type ServerOptions } from './http.js';
export { ApiError } from './errors.js';
