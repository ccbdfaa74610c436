// Punycode (RFC 3492) and IDNA 2008 label validity (RFC 5891/5892) on known cases, the A-label
// witness search against its fast rule, and the hostname label check in the matcher: no state
// it reaches is a dead end (random byte walks that favour A-labels), tight maxLength included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { aLabelValid, aLabelWitness, derivedProperty, uLabelValid } from '../src/constrain/idna/idna.js';
import { isVirama, joiningType } from '../src/constrain/idna/idna-tables.js';
import { aLabelViable } from '../src/constrain/idna/host-labels.js';
import { punycodeDecode, punycodeEncode } from '../src/constrain/idna/punycode.js';
import { canEnd, type State, step, val } from '../src/constrain/matcher.js';
import { forcedCallState } from '../src/server/api/structured.js';
import { compileSchema } from '../src/constrain/schema.js';
import { Rng } from '../src/util/rng.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';

registerIdnaHostnames(); // hostnames as the server compiles them (with the A-label check)

const cps = (s: string): number[] => [...s].map((c) => c.codePointAt(0)!);

test('punycode: RFC 3492 §7.1 samples decode and re-encode; overflow and bad digits are refused', () => {
  const samples: [string, string][] = [
    ['egbpdaj6bu4bxfgehfvwxn', 'ليهمابتكلموشعربي؟'], // (A) Arabic (Egyptian)
    ['ihqwcrb4cv8a8dqg056pqjye', '他们为什么不说中文'], // (B) Chinese (simplified)
    ['3B-ww4c5e180e575a65lsy2b', '3年B組金八先生'], // (L) mixed case basic code points
    ['-> $1.00 <--', '-> $1.00 <-'], // (S) basic code points only, a final delimiter
  ];
  for (const [puny, text] of samples) {
    assert.deepEqual(punycodeDecode(puny), cps(text), puny);
    assert.equal(punycodeEncode(cps(text)), puny, text);
  }
  assert.deepEqual(punycodeDecode('IHQWCRB4CV8A8DQG056PQJYE'), cps('他们为什么不说中文'), 'digits are case-insensitive');
  assert.equal(punycodeDecode('zzzzzzzzzzzz'), null, 'overflow');
  assert.equal(punycodeDecode('99999999'), null, 'a code point past U+10FFFF');
  assert.equal(punycodeDecode('x'), null, 'a delta cut short');
  assert.equal(punycodeDecode('ab_c'), null, 'not a digit');
  assert.equal(punycodeDecode('é-abc'), null, 'a non-basic code point before the delimiter');
});

test('idna: RFC 5892 derived properties, viramas and joining types', () => {
  const expect: [number, string][] = [
    [0x61, 'PVALID'], [0x2d, 'PVALID'], [0x41, 'DISALLOWED'], [0xe9, 'PVALID'], [0x301, 'PVALID'], [0x4e00, 'PVALID'],
    [0xdf, 'PVALID'], [0x3c2, 'PVALID'], [0x6fd, 'PVALID'], [0x3007, 'PVALID'], // exceptions, PVALID
    [0xb7, 'CONTEXTO'], [0x375, 'CONTEXTO'], [0x5f3, 'CONTEXTO'], [0x30fb, 'CONTEXTO'], [0x663, 'CONTEXTO'], [0x6f3, 'CONTEXTO'],
    [0x640, 'DISALLOWED'], [0x7fa, 'DISALLOWED'], [0x302e, 'DISALLOWED'], [0x303b, 'DISALLOWED'], // exceptions, DISALLOWED
    [0x200c, 'CONTEXTJ'], [0x200d, 'CONTEXTJ'], [0x378, 'UNASSIGNED'], [0xfdd0, 'DISALLOWED'], [0x20, 'DISALLOWED'], [0xad, 'DISALLOWED'],
    [0x2126, 'DISALLOWED'], [0xff21, 'DISALLOWED'], [0x1100, 'DISALLOWED'], [0x20d0, 'DISALLOWED'], [0x1d100, 'DISALLOWED'],
    [0x131, 'PVALID'], [0x13a0, 'PVALID'], [0xab70, 'DISALLOWED'], [0x1fb3, 'DISALLOWED'], [0x345, 'DISALLOWED'], [0x2e, 'DISALLOWED'],
  ];
  for (const [cp, p] of expect) assert.equal(derivedProperty(cp), p, `U+${cp.toString(16)}`);
  for (const v of [0x94d, 0x9cd, 0xd4d, 0x1039, 0xe3a, 0x1714]) assert.ok(isVirama(v), `U+${v.toString(16)} is a virama`);
  for (const v of [0x301, 0x93c, 0x94c, 0x61]) assert.ok(!isVirama(v), `U+${v.toString(16)} is no virama`);
  assert.deepEqual([0x628, 0x627, 0x64b, 0x200c, 0x61, 0x1820, 0xa872].map(joiningType), ['D', 'R', 'T', 'U', 'U', 'D', 'L']);
});

test('idna: A-labels and U-labels', () => {
  for (const ok of ['xn--ll-0ea', 'XN--ll-0ea', 'Xn--9n2bp8q', 'xn--bcher-kva', 'xn--ihqwcrb4cv8a8dqg056pqjye']) assert.ok(aLabelValid(ok), ok);
  // the Punycode is lowercase, as the encoder writes it; only the prefix may be in any case
  for (const bad of ['xn--LL-0ea', 'xn--ll-0EA', 'xn--abc-', 'xn--', 'xn--a', 'xn--bcher-kva-', 'xx--bcher-kva', `xn--${'a'.repeat(56)}-6ca`]) assert.ok(!aLabelValid(bad), bad);
  assert.ok(uLabelValid(cps('bücher')));
  assert.ok(!uLabelValid(cps('bu\u0308cher')), 'not NFC');
  assert.ok(!uLabelValid(cps('\u0301abc')), 'a leading combining mark');
  assert.ok(!uLabelValid(cps('ab--ü')), '"--" in positions 3–4');
  assert.ok(uLabelValid(cps('\u0628\u064a\u200c\u0628\u064a')), 'ZWNJ between dual-joining letters');
  assert.ok(!uLabelValid(cps('\u0627\u200c\u0628')), 'ZWNJ after a right-joining letter');
});

test('idna: the witness search is sound and agrees with the fast viability rule', () => {
  const rng = new Rng(11);
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789-';
  for (let i = 0; i < 600; i++) {
    const len = Math.floor(rng.next() * 62);
    let p = 'xn--';
    for (let j = 0; j < len && p.length < 63; j++) p += alphabet[Math.floor(rng.next() * (j % 7 === 0 ? 37 : 26))]!;
    if (rng.next() < 0.2) p = p.toUpperCase();
    const w = aLabelWitness(p);
    if (w !== null) assert.ok(w.startsWith(p) && aLabelValid(w), `${p} → ${w}`);
    assert.equal(aLabelViable(p), w !== null, p);
  }
});

test('matcher: hostname A-labels are checked, and no reachable state is a dead end', () => {
  const accepts = (schema: unknown, text: string): boolean => {
    let st: State = [val(compileSchema(schema), null)];
    for (const b of Buffer.from(JSON.stringify(text), 'utf8')) st = step(st, b);
    return st.some(canEnd);
  };
  const host = { type: 'string', format: 'hostname' };
  for (const ok of ['xn--bcher-kva.example', 'a.XN--ll-0ea.b', 'xn--ihqwcrb4cv8a8dqg056pqjye']) assert.ok(accepts(host, ok), ok);
  for (const bad of ['xn--bcher-kvb.example', 'xn--abc', 'ab--cd.com', 'xn--l-fda']) assert.ok(!accepts(host, bad), bad);
  // a Qwen XML parameter value runs the same check on its raw text
  const tool = { name: 'f', parameters: { type: 'object', properties: { host: { type: 'string', format: 'hostname' } }, required: ['host'] } };
  const xmlOk = (h: string): boolean => {
    let st: State = forcedCallState([tool], 'xml');
    for (const b of Buffer.from(`<tool_call>\n<function=f>\n<parameter=host>\n${h}\n</parameter>\n</function>\n</tool_call>`, 'utf8')) st = step(st, b);
    return st.some(canEnd);
  };
  assert.ok(xmlOk('a.xn--bcher-kva') && xmlOk('example.com') && !xmlOk('xn--bcher-kvb') && !xmlOk('xn--l-fda.com'));
  // property names run no label check: A-labels are refused there (never let through unchecked)
  const keys = compileSchema({ type: 'object', propertyNames: { format: 'hostname' } });
  const keyOk = (k: string): boolean => {
    let st: State = [val(keys, null)];
    for (const b of Buffer.from(`{${JSON.stringify(k)}:1}`, 'utf8')) st = step(st, b);
    return st.some(canEnd);
  };
  assert.ok(keyOk('example.com') && !keyOk('xn--bcher-kva') && !keyOk('xn--bcher-kvb'));
  const afterQuote = step([val(compileSchema({ type: 'string', pattern: '^[a-z]+$' }), null)], 0x22);
  for (const lead of [0xe0, 0xf0]) assert.equal(step(afterQuote, lead).length, 0, `lead byte ${lead.toString(16)}`);
  // random byte walks: from every state reached, some byte continues or the string may end
  const rng = new Rng(5);
  const favoured = [...'xn-.abc019"'].map((c) => c.charCodeAt(0));
  // every byte a hostname string can continue with (any other is refused by the regex), and
  // UTF-8 lead bytes (E0 / F0 start characters ≥ U+0800 / U+10000: never a hostname's)
  const possible = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-."\\'].map((c) => c.charCodeAt(0)).concat([0xc3, 0xe0, 0xed, 0xf0, 0xf4]);
  for (const [schema, starts] of [[host, ['', 'xn--', 'a.xn--', 'xn--ab']], [{ ...host, maxLength: 14 }, ['xn--', 'a.xn--']], [{ ...host, pattern: '^xn--' }, ['xn--']]] as const) {
    const start: State = [val(compileSchema(schema), null)];
    for (let walk = 0; walk < 25; walk++) {
      let text = `"${starts[walk % starts.length]!}`;
      let st = start;
      for (const b of Buffer.from(text)) st = step(st, b);
      assert.ok(st.length > 0, text);
      for (let i = 0; i < 70 && !st.some(canEnd); i++) {
        const next = possible.filter((b) => step(st, b).length > 0);
        assert.ok(next.length > 0, `${JSON.stringify(schema)}: dead end after ${text}`);
        const liked = next.filter((b) => favoured.includes(b) && (b !== 0x22 || rng.next() < 0.1));
        const pool = liked.length > 0 && rng.next() < 0.9 ? liked : next;
        const b = pool[Math.floor(rng.next() * pool.length)]!;
        st = step(st, b);
        text += String.fromCharCode(b);
      }
    }
  }
});
