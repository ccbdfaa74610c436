// JSON texts from clients with the nesting depth bounded before anything is built: request
// bodies by the incremental parser (json-stream.ts), which checks depth as it opens each
// array/object; JSON texts inside a body (tool-call arguments) by a linear scan that counts
// open arrays/objects outside strings, before JSON.parse. Every later walk over the parsed
// value (limits, template rendering, schema compilation) therefore recurses at most
// `maxDepth` levels.
import { ApiError } from './errors.js';
import { JsonBodyParser } from './json-stream.js';

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/** The character offset where `text` first nests deeper than `maxDepth` arrays/objects,
 * or -1 when it never does. Malformed text is left to JSON.parse. */
export function depthExceededAt(text: string, maxDepth: number): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > maxDepth) return i;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) depth--;
  }
  return -1;
}

/** 400 json_too_deep naming the limit (`what` names the JSON text: "the request body", a field). */
export function checkJsonDepth(text: string, maxDepth: number, what: string, param: string | null = null): void {
  const at = depthExceededAt(text, maxDepth);
  if (at >= 0) {
    throw new ApiError(400, `${what} nests arrays/objects deeper than the limit of ${maxDepth} levels (--max-json-depth; ` +
      `exceeded at character ${at})`, param, 'json_too_deep');
  }
}

/** Parse a whole request body at once (the server feeds its JsonBodyParser chunk by chunk as
 * the body arrives): 400 when empty, too deep or not JSON. */
export function parseJsonBody(buf: Buffer, maxDepth: number): unknown {
  const parser = new JsonBodyParser(maxDepth);
  parser.push(buf);
  return parser.end();
}
