// OpenAI-compatible HTTP server over an Engine.
export { startServer, type RunningServer, type ServerOptions } from './http/server.js';
export { ApiError } from './http/errors.js';
