// unevaluatedProperties where the properties a schema evaluates are known statically: those
// named in `properties` and matched by `patternProperties` of the schema itself and of the
// subschemas its allOf and $ref apply in place (recursively). Then the keyword constrains the
// other keys like additionalProperties over that set. An `additionalProperties` in that set
// evaluates every key (the keyword is then moot). Applicators whose evaluation depends on the
// instance (anyOf, oneOf, if, not, dependentSchemas) make the set dynamic: the caller refuses.
type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export type Evaluated =
  | { readonly kind: 'all' }
  | { readonly kind: 'known'; readonly names: readonly string[]; readonly patterns: readonly string[] }
  | { readonly kind: 'dynamic'; readonly keyword: string };

const DYNAMIC = ['anyOf', 'oneOf', 'if', 'not', 'dependentSchemas', 'dependencies', '$dynamicRef', '$recursiveRef'] as const;

/** The properties `s` evaluates, wherever the instance is. `deref` resolves a $ref found in `holder`. */
export function evaluatedProperties(s: Obj, deref: (ref: unknown, holder: Obj) => unknown): Evaluated {
  const names = new Set<string>();
  const patterns = new Set<string>();
  const seen = new Set<Obj>();
  const todo: Obj[] = [s];
  while (todo.length > 0) {
    const x = todo.pop()!;
    if (seen.has(x)) continue;
    seen.add(x);
    const dyn = DYNAMIC.find((k) => x[k] !== undefined && !(k === 'dependencies' && isObj(x[k]) && Object.values(x[k]).every(Array.isArray)));
    if (dyn) return { kind: 'dynamic', keyword: dyn };
    if (x['additionalProperties'] !== undefined || (x !== s && x['unevaluatedProperties'] !== undefined)) return { kind: 'all' };
    if (isObj(x['properties'])) for (const n of Object.keys(x['properties'])) names.add(n);
    if (isObj(x['patternProperties'])) for (const p of Object.keys(x['patternProperties'])) patterns.add(p);
    const sub = [...(Array.isArray(x['allOf']) ? x['allOf'] : []), ...(x['$ref'] !== undefined ? [deref(x['$ref'], x)] : [])];
    for (const y of sub) {
      if (y === true) continue;
      if (!isObj(y)) return y === false ? { kind: 'all' } : { kind: 'dynamic', keyword: 'allOf' }; // false: nothing passes anyway
      todo.push(y);
    }
  }
  return { kind: 'known', names: [...names], patterns: [...patterns] };
}
