// The logger: JSON lines unless the stream is a terminal (then key=value text), level
// filtering, errors with their stack in both formats.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../src/util/log.js';

function capture(isTTY: boolean): { stream: { write(s: string): boolean; isTTY: boolean }; text: () => string } {
  const parts: string[] = [];
  return { stream: { write: (s: string) => parts.push(s) > 0, isTTY }, text: () => parts.join('') };
}

test('JSON when the stream is not a terminal; levels below the threshold are dropped', () => {
  const c = capture(false);
  const log = createLogger({ level: 'info', stream: c.stream });
  log.debug('hidden', { a: 1 });
  log.info('request', { id: 'r1', status: 200, skipped: undefined });
  log.error('failed', { err: new Error('boom') });
  const lines = c.text().trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.equal(lines.length, 2);
  assert.deepEqual({ ...lines[0], time: 'T' }, { time: 'T', level: 'info', msg: 'request', id: 'r1', status: 200 });
  assert.ok(!Number.isNaN(Date.parse(lines[0]!['time'] as string)));
  const err = lines[1]!['err'] as { type: string; message: string; stack: string };
  assert.equal(err.message, 'boom');
  assert.match(err.stack, /Error: boom\n\s+at /);
});

test('readable key=value lines on a terminal, with an error stack after the line', () => {
  const c = capture(true);
  const log = createLogger({ level: 'debug', stream: c.stream });
  log.debug('request', { route: '/v1/models', note: 'two words' });
  log.warn('shutdown failed', { err: new Error('boom') });
  const text = c.text();
  assert.match(text, /^\S+Z DEBUG request route=\/v1\/models note="two words"\n/);
  assert.match(text, /WARN  shutdown failed err=boom\nError: boom\n\s+at /);
  const silent = capture(false);
  createLogger({ level: 'silent', stream: silent.stream }).error('x');
  assert.equal(silent.text(), '');
});
