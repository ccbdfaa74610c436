// A generator of nested-combinator JSON schemas (issue 48): `allOf` of `anyOf`s, nested
// `depth` levels. Each level intersects `width` unions of `width` alternatives: small
// objects, and nested levels (in the first union, or in every one). Intersecting unions
// distributes (a cross product), so the compiled alternatives grow exponentially with the
// depth while the text stays a few KB: schemas that used to hold the event loop for seconds,
// then fail with a 500 (a stack overflow).

export interface NestedSpec {
  readonly depth: number;
  readonly width: number;
  /** Leaves: small objects, or enums of 4 values (literal cross products: the cheapest
   * intersections, which used to escape the time budget and overflow the stack). */
  readonly leaf: 'object' | 'enum';
  /** Properties per leaf object. */
  readonly props: number;
  /** Unions holding a nested level: the first, or every one (text grows width^depth). */
  readonly nestIn: 'first' | 'every';
  /** Leaf property values: typed ({"type": ...}) or unconstrained ({}: shorter text). */
  readonly values?: 'typed' | 'any';
}

/** The schema of `spec` (property names are distinct: a counter in base 36). */
export function nestedCombinators(spec: NestedSpec): Record<string, unknown> {
  let next = 0;
  const leaf = (): Record<string, unknown> => (spec.leaf === 'enum' ? { enum: [next % 4, ++next % 4, 'a', null] } : {
    properties: Object.fromEntries(Array.from({ length: spec.props }, (_, i) => [(next++).toString(36), spec.values === 'any' ? {} : { type: i % 2 === 0 ? 'string' : 'integer' }])),
  });
  const level = (depth: number): Record<string, unknown> => {
    if (depth === 0) return leaf();
    return {
      allOf: Array.from({ length: spec.width }, (_, u) => ({
        anyOf: Array.from({ length: spec.width }, (_, a) => (a === 0 && (u === 0 || spec.nestIn === 'every') ? level(depth - 1) : leaf())),
      })),
    };
  };
  return level(spec.depth);
}

/** The shapes: 5 levels in 3.3 KB (enums-5x2: 1.0 s on the event loop before; enums-4x2:
 * a 500, stack overflow), and 6–28 KB variants. */
export const NESTED_SHAPES: Readonly<Record<string, NestedSpec>> = {
  'enums-4x2': { depth: 4, width: 2, leaf: 'enum', props: 0, nestIn: 'every' },
  'enums-5x2': { depth: 5, width: 2, leaf: 'enum', props: 0, nestIn: 'every' },
  'enums-6x2': { depth: 6, width: 2, leaf: 'enum', props: 0, nestIn: 'every' },
  'enums-4x3': { depth: 4, width: 3, leaf: 'enum', props: 0, nestIn: 'every' },
  'objects-5x2': { depth: 5, width: 2, leaf: 'object', props: 1, nestIn: 'every', values: 'any' },
  'objects-6x2': { depth: 6, width: 2, leaf: 'object', props: 1, nestIn: 'every' },
  'objects-6x2-wide': { depth: 6, width: 2, leaf: 'object', props: 5, nestIn: 'every' },
  'objects-5x4': { depth: 5, width: 4, leaf: 'object', props: 4, nestIn: 'first' },
};

export const schemaBytes = (s: unknown): number => Buffer.byteLength(JSON.stringify(s));
