// The built-in model shipped with the package (and the repository): an ~8M-parameter
// Qwen3.5-architecture chat model with <think> reasoning. The path is absolute and found
// from this module's own location (dist/src/hub/ → the package root), so it holds
// wherever the package is installed and whatever the working directory.
import { fileURLToPath } from 'node:url';

/** Absolute path of the packaged models/tiny-think directory. */
export const BUILTIN_MODEL: string = fileURLToPath(new URL('../../../models/tiny-think', import.meta.url));

/** How the docs and the CLI name the built-in model (relative to the package root). */
export const BUILTIN_MODEL_NAME = 'models/tiny-think';
