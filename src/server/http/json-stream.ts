// An incremental JSON parser for request bodies: fed each chunk as it arrives from the
// socket, it does a chunk's worth of work per call, so a multi-megabyte body never holds
// the event loop for more than one chunk (≤ 64 KiB by default in node:http) — unlike
// `JSON.parse` over the whole text once it has arrived. It builds the same value as
// `JSON.parse` (a `__proto__` key becomes an own property, the last duplicate key wins)
// and checks the nesting depth as it opens each array/object, so no deeper value is ever
// built. Strings are scanned in runs by a sticky regex; a string, number or escape split
// across chunks is carried over without rescanning what was already consumed.
import { StringDecoder } from 'node:string_decoder';
import { ApiError } from './errors.js';

/** What the parser expects next. */
const enum Mode {
  Value, // any value (the root, after ':' or after ',' in an array)
  ArrayFirst, // a value or ']'
  ObjectFirst, // a key or '}'
  ObjectKey, // a key (after ',' in an object)
  Colon,
  AfterValue, // ',' or the closer of the open container (nothing at the root)
  String,
  Number,
  Literal,
  Done, // only whitespace
}

/** An open array or object, and the key whose value comes next (objects). */
interface Frame {
  readonly array: unknown[] | null;
  readonly object: Record<string, unknown> | null;
  key: string;
}

/** A run of string characters that need no escape handling. */
const STRING_RUN = /[^"\\\u0000-\u001f]*/y;
const NUMBER_RUN = /[-+0-9.eE]*/y;
const LITERAL_RUN = /[a-z]*/y;
const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const HEX4 = /^[0-9a-fA-F]{4}$/;
const LITERALS: ReadonlyMap<string, unknown> = new Map<string, unknown>([['true', true], ['false', false], ['null', null]]);
const ESCAPES: ReadonlyMap<string, string> = new Map([['"', '"'], ['\\', '\\'], ['/', '/'], ['b', '\b'], ['f', '\f'], ['n', '\n'], ['r', '\r'], ['t', '\t']]);

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function setKey(o: Record<string, unknown>, key: string, value: unknown): void {
  // JSON.parse defines `__proto__` as an own property; plain assignment would set the prototype
  if (key === '__proto__') Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
  else o[key] = value;
}

export class JsonBodyParser {
  private readonly decoder = new StringDecoder('utf8');
  private readonly stack: Frame[] = [];
  private mode = Mode.Value;
  private root: unknown = undefined;
  /** Characters consumed by earlier chunks (error positions are offsets in the whole text). */
  private base = 0;
  /** An escape sequence cut by the end of a chunk, prepended to the next one. */
  private carry = '';
  /** The string being read: its parts so far, and whether it is an object key. */
  private parts: string[] = [];
  private isKey = false;
  /** The number or literal being read. */
  private token = '';
  private empty = true;
  private failure: ApiError | null = null;

  /** `maxDepth`: arrays/objects nested deeper are a 400 json_too_deep naming --max-json-depth. */
  constructor(private readonly maxDepth: number) {}

  /** The first error met (later input is ignored once there is one). */
  get error(): ApiError | null {
    return this.failure;
  }

  /** Feed the next bytes of the body. Never throws: an error is kept for `end()`. */
  push(bytes: Buffer): void {
    if (this.failure !== null || bytes.length === 0) return;
    this.empty = false;
    this.feed(this.decoder.write(bytes));
  }

  /** The parsed value; throws the 400 for an empty, malformed, incomplete or too deep body. */
  end(): unknown {
    if (this.failure === null) this.feed(this.decoder.end());
    if (this.failure !== null) throw this.failure;
    if (this.empty) throw new ApiError(400, 'the request body is empty; expected a JSON object');
    if (this.carry !== '') throw this.syntax('unexpected end of the body inside a string', this.base);
    // a number or literal at the root ends with the text
    if (this.stack.length === 0 && (this.mode === Mode.Number || this.mode === Mode.Literal)) this.finishToken(this.base);
    if (this.failure !== null) throw this.failure;
    if (this.mode !== Mode.Done) throw this.syntax('unexpected end of the body', this.base);
    return this.root;
  }

  private feed(chunk: string): void {
    const s = this.carry === '' ? chunk : this.carry + chunk;
    this.carry = '';
    const n = s.length;
    let i = 0;
    while (i < n && this.failure === null) {
      switch (this.mode) {
        case Mode.String:
          i = this.scanString(s, i);
          break;
        case Mode.Number:
        case Mode.Literal:
          i = this.scanToken(s, i);
          break;
        default: {
          const c = s.charCodeAt(i);
          if (isSpace(c)) i++;
          else i = this.structural(s, i);
        }
      }
    }
    this.base += n - this.carry.length;
  }

  /** One character outside strings and tokens, at s[i]; returns the next index. */
  private structural(s: string, i: number): number {
    const ch = s[i]!;
    const at = this.base + i;
    switch (this.mode) {
      case Mode.Value:
      case Mode.ArrayFirst:
        if (ch === ']' && this.mode === Mode.ArrayFirst) return this.close(i);
        return this.startValue(s, i);
      case Mode.ObjectFirst:
      case Mode.ObjectKey:
        if (ch === '}' && this.mode === Mode.ObjectFirst) return this.close(i);
        if (ch !== '"') return this.fail(`expected a property name in double quotes, found ${JSON.stringify(ch)}`, at);
        this.startString(true);
        return i + 1;
      case Mode.Colon:
        if (ch !== ':') return this.fail(`expected ':' after a property name, found ${JSON.stringify(ch)}`, at);
        this.mode = Mode.Value;
        return i + 1;
      case Mode.AfterValue: {
        const top = this.stack[this.stack.length - 1]!;
        if (ch === ',') {
          this.mode = top.array ? Mode.Value : Mode.ObjectKey;
          return i + 1;
        }
        if ((ch === ']' && top.array) || (ch === '}' && top.object)) return this.close(i);
        return this.fail(`expected ',' or '${top.array ? ']' : '}'}', found ${JSON.stringify(ch)}`, at);
      }
      default:
        return this.fail(`unexpected ${JSON.stringify(ch)} after the JSON value`, at);
    }
  }

  private startValue(s: string, i: number): number {
    const ch = s[i]!;
    if (ch === '{' || ch === '[') {
      if (this.stack.length + 1 > this.maxDepth) {
        this.failure = new ApiError(400, `the request body nests arrays/objects deeper than the limit of ${this.maxDepth} levels ` +
          `(--max-json-depth; exceeded at character ${this.base + i})`, null, 'json_too_deep');
        return s.length;
      }
      const array = ch === '[' ? [] : null;
      this.stack.push({ array, object: array ? null : {}, key: '' });
      this.mode = array ? Mode.ArrayFirst : Mode.ObjectFirst;
      return i + 1;
    }
    if (ch === '"') {
      this.startString(false);
      return i + 1;
    }
    if (ch === '-' || (ch >= '0' && ch <= '9')) this.mode = Mode.Number;
    else if (ch >= 'a' && ch <= 'z') this.mode = Mode.Literal;
    else return this.fail(`unexpected ${JSON.stringify(ch)} where a value was expected`, this.base + i);
    this.token = '';
    return i;
  }

  private startString(isKey: boolean): void {
    this.mode = Mode.String;
    this.isKey = isKey;
    this.parts = [];
  }

  /** Inside a string at s[i]: consume a run, an escape or the closing quote. */
  private scanString(s: string, i: number): number {
    STRING_RUN.lastIndex = i;
    STRING_RUN.test(s);
    const j = STRING_RUN.lastIndex;
    if (j > i) this.parts.push(s.slice(i, j));
    if (j >= s.length) return j;
    const c = s.charCodeAt(j);
    if (c === 0x22) {
      const text = this.parts.length === 1 ? this.parts[0]! : this.parts.join('');
      this.parts = [];
      if (this.isKey) {
        this.stack[this.stack.length - 1]!.key = text;
        this.mode = Mode.Colon;
      } else this.value(text);
      return j + 1;
    }
    if (c !== 0x5c) return this.fail('a control character inside a string must be escaped', this.base + j);
    return this.escape(s, j);
  }

  /** The escape sequence at s[j] ('\\'); carried to the next chunk when cut. */
  private escape(s: string, j: number): number {
    const kind = s[j + 1];
    if (kind === undefined || (kind === 'u' && j + 6 > s.length)) {
      this.carry = s.slice(j);
      return s.length;
    }
    if (kind === 'u') {
      const hex = s.slice(j + 2, j + 6);
      if (!HEX4.test(hex)) return this.fail(`bad unicode escape \\u${hex}`, this.base + j);
      this.parts.push(String.fromCharCode(parseInt(hex, 16)));
      return j + 6;
    }
    const out = ESCAPES.get(kind);
    if (out === undefined) return this.fail(`bad escape \\${kind}`, this.base + j);
    this.parts.push(out);
    return j + 2;
  }

  /** Inside a number or literal at s[i]: extend it, and finish it at the first other character. */
  private scanToken(s: string, i: number): number {
    const run = this.mode === Mode.Number ? NUMBER_RUN : LITERAL_RUN;
    run.lastIndex = i;
    run.test(s);
    const j = run.lastIndex;
    this.token += s.slice(i, j);
    if (this.mode === Mode.Literal && this.token.length > 5) return this.fail(`unexpected word ${JSON.stringify(this.token.slice(0, 8))}`, this.base + i);
    if (j >= s.length) return j;
    this.finishToken(this.base + j);
    return j;
  }

  private finishToken(at: number): void {
    const t = this.token;
    this.token = '';
    if (this.mode === Mode.Number) {
      if (!NUMBER.test(t)) this.fail(`bad number ${JSON.stringify(t.slice(0, 40))}`, at - t.length);
      else this.value(Number(t));
    } else if (!LITERALS.has(t)) this.fail(`unexpected word ${JSON.stringify(t)}`, at - t.length);
    else this.value(LITERALS.get(t));
  }

  /** Close the open array/object at s[i]. */
  private close(i: number): number {
    const top = this.stack.pop()!;
    this.value(top.array ?? top.object);
    return i + 1;
  }

  /** A complete value: the root, an array element or the value of the pending key. */
  private value(v: unknown): void {
    const top = this.stack[this.stack.length - 1];
    if (top === undefined) {
      this.root = v;
      this.mode = Mode.Done;
      return;
    }
    if (top.array) top.array.push(v);
    else setKey(top.object!, top.key, v);
    this.mode = Mode.AfterValue;
  }

  private syntax(what: string, at: number): ApiError {
    return new ApiError(400, `the request body is not valid JSON: ${what} (at character ${at})`, null, 'invalid_json');
  }

  /** Keep the first error; returns an index that ends the current chunk. */
  private fail(what: string, at: number): number {
    this.failure ??= this.syntax(what, at);
    return Number.MAX_SAFE_INTEGER;
  }
}
