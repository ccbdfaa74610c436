// The package's name and version, read once from package.json at the package root
// (dist/src/util/ → ../../../package.json; npm always ships package.json).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface PackageInfo {
  readonly name: string;
  readonly version: string;
}

let cached: PackageInfo | null = null;

export function packageInfo(): PackageInfo {
  if (cached) return cached;
  const file = fileURLToPath(new URL('../../../package.json', import.meta.url));
  const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
  cached = {
    name: typeof pkg.name === 'string' ? pkg.name : 'deltaserve',
    version: typeof pkg.version === 'string' ? pkg.version : '0.0.0',
  };
  return cached;
}
