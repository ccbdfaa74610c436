// Paths to the shared test assets (../shared beside the repo). A missing asset fails loudly.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root (this file compiles to dist/test/paths.js). */
export const REPO_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
export const SHARED = resolve(REPO_ROOT, '..', 'shared');

export function sharedPath(...parts: string[]): string {
  const p = join(SHARED, ...parts);
  if (!existsSync(p)) throw new Error(`required test asset is missing: ${p} (expected ../shared beside the repo)`);
  return p;
}
export const TINY_THINK = (): string => sharedPath('models', 'tiny-think');
export const TINY_NEXT_MOE = (): string => sharedPath('models', 'tiny-next-moe');
