// No silent ignoring: every request field a route does not implement is a 400 naming it,
// unless the server runs with --lenient (then unknown fields are ignored, as before).
// Fields whose given value means "the default behaviour" (e.g. `store: false`) are accepted.
import { invalid } from '../http/errors.js';
import type { Body } from './validate.js';

/** Field → a check that the given value asks for nothing unimplemented (true = fine). */
export type FieldRules = Readonly<Record<string, true | ((v: unknown) => boolean)>>;

/** Values that ask for the default behaviour of OpenAI fields deltaserve does not implement. */
export const DEFAULT_VALUED: FieldRules = {
  store: (v) => v === false,
  service_tier: (v) => v === 'auto' || v === 'default',
  user: true, // an end-user id for abuse monitoring: nothing to do
  safety_identifier: true,
};

type Rule = true | ((v: unknown) => boolean);

/** The rules as a Map, built once per rule object: a field named `__proto__` or
 * `constructor` must find nothing, not Object.prototype's members. */
const asMaps = new WeakMap<FieldRules, ReadonlyMap<string, Rule>>();
function ruleMap(known: FieldRules): ReadonlyMap<string, Rule> {
  let m = asMaps.get(known);
  if (!m) {
    m = new Map(Object.entries(known));
    asMaps.set(known, m);
  }
  return m;
}

/** 400 for the first field of `b` that `known` does not accept (null values count as absent). */
export function checkFields(b: Body, known: FieldRules, lenient: boolean, route: string): void {
  if (lenient) return;
  const rules = ruleMap(known);
  for (const [key, v] of Object.entries(b)) {
    if (v === undefined || v === null) continue;
    const rule = rules.get(key);
    if (rule === true || (rule && rule(v))) continue;
    if (rule) throw invalid(key, `${key} = ${JSON.stringify(v)} is not supported by ${route} (start the server with --lenient to ignore it)`, 'unsupported_parameter');
    throw invalid(key, `${key} is not supported by ${route} (start the server with --lenient to ignore unknown fields)`, 'unsupported_parameter');
  }
}

/** Fields every OpenAI generation route shares (see commonParams). */
export const COMMON_FIELDS: FieldRules = {
  ...DEFAULT_VALUED,
  model: true, stream: true, stream_options: true, temperature: true, top_p: true, top_k: true, min_p: true, seed: true,
  stop: true, presence_penalty: true, frequency_penalty: true, repetition_penalty: true, n: true, ignore_eos: true,
  stop_token_ids: true, logit_bias: true, logprobs: true,
};
