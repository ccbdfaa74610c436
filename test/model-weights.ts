// A loaded model's weights as a flat map, for tests that compare two loads tensor by tensor.
import type { Weight } from '../src/kernels/types.js';

/** Every Weight in a ModelWeights tree, keyed by its path from `path` (e.g. "w.layers.0.mlp.up"). */
export function weightsByPath(node: unknown, path = 'w', out = new Map<string, Weight>()): Map<string, Weight> {
  if (node && typeof node === 'object') {
    if ('data' in node && 'rows' in node && 'cols' in node) out.set(path, node as Weight);
    else for (const [k, v] of Object.entries(node)) weightsByPath(v, `${path}.${k}`, out);
  }
  return out;
}
