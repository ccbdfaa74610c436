// The terminal view of a streamed answer (cli/answer-view.ts): dimmed reasoning on a
// terminal, reasoning on its own stream when piped, hidden reasoning, no dim left open.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AnswerView, colorAllowed, DIM, UNDIM, type Sink } from '../src/cli/answer-view.js';

function sink(isTTY: boolean): Sink & { text: () => string } {
  let buf = '';
  return { write: (t) => void (buf += t), isTTY, text: () => buf };
}

const DELTAS: [string, string][] = [['\n', ''], ['12+30', ''], ['\n42\n', ''], ['', '4'], ['', '2']];

function play(view: AnswerView, deltas: readonly [string, string][] = DELTAS): void {
  for (const [r, c] of deltas) view.push(r, c);
  view.end();
}

test('on a terminal: reasoning dimmed (each piece closed), a blank line, then the answer', () => {
  const out = sink(true);
  play(new AnswerView({ content: out, reasoning: out, color: true }));
  assert.equal(out.text(), `${DIM}12+30${UNDIM}${DIM}\n42\n${UNDIM}\n42\n`);
  const plain = out.text().split(DIM).join('').split(UNDIM).join('');
  assert.equal(plain, '12+30\n42\n\n42\n');
});

test('piped: the answer alone on stdout, the reasoning on stderr, no escapes', () => {
  const out = sink(false);
  const err = sink(false);
  play(new AnswerView({ content: out, reasoning: err, color: true }));
  assert.equal(out.text(), '42\n');
  assert.equal(err.text(), '12+30\n42\n');
});

test('hidden reasoning (--no-think in chat), and NO_COLOR', () => {
  const out = sink(true);
  play(new AnswerView({ content: out, reasoning: null, color: true }));
  assert.equal(out.text(), '42\n');
  const nc = sink(true);
  play(new AnswerView({ content: nc, reasoning: nc, color: colorAllowed({ NO_COLOR: '1' }) }));
  assert.equal(nc.text(), '12+30\n42\n\n42\n');
  assert.equal(colorAllowed({}), true);
});

test('an answer cut inside its reasoning ends on a newline, with the dim closed', () => {
  const out = sink(true);
  play(new AnswerView({ content: out, reasoning: out, color: true }), [['\nabc', '']]);
  assert.equal(out.text(), `${DIM}abc${UNDIM}\n`);
  const err = sink(false);
  const stdout = sink(false);
  play(new AnswerView({ content: stdout, reasoning: err, color: true }), [['abc', ''], ['', 'x']]);
  assert.equal(err.text(), 'abc\n');
  assert.equal(stdout.text(), 'x\n');
});
