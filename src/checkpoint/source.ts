// Where a model comes from: `--model` names a Hugging Face directory (config.json +
// safetensors), a `.gguf` file, a directory holding one GGUF (or the parts of one split
// GGUF), or the first part of a split GGUF. The one place model paths are resolved.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DeltaserveError } from '../util/errors.js';

export type ModelSource =
  | { readonly kind: 'hf'; readonly dir: string }
  | { readonly kind: 'gguf'; readonly file: string };

const FIRST_PART = /-00001-of-\d{5}\.gguf$/;
const ANY_PART = /-\d{5}-of-\d{5}\.gguf$/;

export function resolveModelSource(path: string): ModelSource {
  const abs = resolve(path);
  if (!existsSync(abs)) throw new DeltaserveError('bad_config', `model not found: ${abs} (expected a model directory or a .gguf file)`);
  if (!statSync(abs).isDirectory()) {
    if (!abs.endsWith('.gguf')) throw new DeltaserveError('bad_config', `model file ${abs} is not a .gguf file (pass a GGUF file or a model directory)`);
    return { kind: 'gguf', file: abs };
  }
  if (existsSync(join(abs, 'config.json'))) return { kind: 'hf', dir: abs };
  const ggufs = readdirSync(abs).filter((f) => f.endsWith('.gguf')).sort();
  if (ggufs.length === 0) return { kind: 'hf', dir: abs }; // reports the missing config.json
  const whole = ggufs.filter((f) => !ANY_PART.test(f));
  const firsts = ggufs.filter((f) => FIRST_PART.test(f));
  if (whole.length === 1 && firsts.length === 0) return { kind: 'gguf', file: join(abs, whole[0]!) };
  if (whole.length === 0 && firsts.length === 1) return { kind: 'gguf', file: join(abs, firsts[0]!) };
  throw new DeltaserveError('bad_config',
    `model directory ${abs} holds several GGUF models (${ggufs.join(', ')}); pass the .gguf file to use`);
}
