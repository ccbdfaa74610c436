// `deltaserve chat` under a pseudo-terminal (util-linux `script`): streamed answers with the
// reasoning dimmed, the conversation kept (turn 2 hits the prefix cache), /stats, /save,
// /think off, /reset, and Ctrl-C (a key in the terminal's raw mode) stopping an answer,
// then a second Ctrl-C exiting. The built-in tiny-think model, greedy: deterministic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';

const KERNELS = process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm';
const MAIN = join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js');
const DIM = '\x1b[2m';
const WAIT_MS = 120_000;

/** Terminal output without colour / cursor sequences and carriage returns. */
const plain = (s: string): string => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\r/g, '');

class Pty {
  readonly child: ChildProcessWithoutNullStreams;
  raw = '';
  private readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    const cmd = [process.execPath, MAIN, 'chat', '--kernels', KERNELS, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    // -e: script exits with the command's status; -f: flush output as it comes
    this.child = spawn('script', ['-qfec', cmd, '/dev/null'], { env: { ...process.env, NO_COLOR: '', TERM: 'xterm' } });
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (d: string) => (this.raw += d));
    this.exited = new Promise((resolve) => this.child.on('close', (code) => resolve(code)));
  }

  /** Resolves with the raw output from `from` once its plain text matches `re`. */
  async until(re: RegExp, from: number): Promise<string> {
    const deadline = Date.now() + WAIT_MS;
    while (!re.test(plain(this.raw.slice(from)))) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${String(re)}; output so far:\n${plain(this.raw)}`);
      if (this.child.exitCode !== null) throw new Error(`chat exited (${this.child.exitCode}) before ${String(re)}:\n${plain(this.raw)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return this.raw.slice(from);
  }

  /** Types `text` (Enter is \r, as a terminal sends it) and waits for the next prompt. */
  async send(text: string, enter = true): Promise<string> {
    const from = this.raw.length;
    this.child.stdin.write(enter ? `${text}\r` : text);
    const out = await this.until(/>>> $/, from);
    return out;
  }

  exit(): Promise<number | null> {
    return this.exited;
  }
}

test('util-linux script is installed (the pseudo-terminal of these tests)', () => {
  assert.equal(spawnSync('script', ['--version']).status, 0, 'script (util-linux) is required');
});

test('chat: streams dimmed reasoning, keeps the conversation, /stats, /save, /think, /reset', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ds-chat-'));
  const pty = new Pty([]);
  t.after(() => {
    pty.child.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  await pty.until(/>>> $/, 0);
  const first = await pty.send('What is 12 + 30?');
  assert.ok(first.includes(DIM), 'reasoning is dimmed');
  const answer1 = plain(first).trim().split('\n').slice(-2)[0]!;
  assert.match(answer1, /^\d+$/, `a numeric answer on its own line: ${plain(first)}`);
  assert.doesNotMatch(plain(first), /<\/?think>/, 'no think tags');

  const stats1 = plain(await pty.send('/stats'));
  assert.match(stats1, /prompt tokens: +\d+ \(cached 0\)/);
  assert.match(stats1, /time to first token: \d+ ms/);
  assert.match(stats1, /decode: [\d.]+ tok\/s/);
  assert.match(stats1, /MTP accept length: [\d.]+, accept rate: \d+%/);

  await pty.send('What is 2 + 3?');
  const stats2 = plain(await pty.send('/stats'));
  assert.match(stats2, /turns in history: 2/);
  const cached = Number(/\(cached (\d+)\)/.exec(stats2)?.[1]);
  assert.ok(cached > 0, `turn 2 reuses turn 1 through the prefix cache: ${stats2}`);

  const file = join(dir, 'chat.json');
  assert.match(plain(await pty.send(`/save ${file}`)), /saved 4 messages/);
  const saved = JSON.parse(readFileSync(file, 'utf8')) as { role: string; content: string; reasoning_content?: string }[];
  assert.deepEqual(saved.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  assert.equal(saved[0]!.content, 'What is 12 + 30?');
  assert.equal(saved[1]!.content, answer1);
  assert.ok((saved[1]!.reasoning_content ?? '').length > 0);

  assert.match(plain(await pty.send('/think off')), /thinking off/);
  const noThink = await pty.send('What is 7 + 1?');
  assert.ok(!noThink.includes(DIM), `thinking off: no reasoning shown: ${JSON.stringify(noThink)}`);
  assert.match(plain(await pty.send('/reset')), /conversation cleared/);
  assert.match(plain(await pty.send('/stats')), /turns in history: 0/);
  assert.match(plain(await pty.send('/help')), /\/save FILE/);
  pty.child.stdin.write('/bye\r');
  assert.equal(await pty.exit(), 0);
});

test('chat: Ctrl-C stops an answer (not kept), a second Ctrl-C exits', async (t) => {
  const pty = new Pty(['--ignore-eos', '--max-tokens', '4000']);
  t.after(() => pty.child.kill());
  await pty.until(/>>> $/, 0);
  const from = pty.raw.length;
  pty.child.stdin.write('What is 12 + 30?\r');
  await pty.until(/What is 12 \+ 30\?\n[^]{200}/, from); // the answer is streaming
  pty.child.stdin.write('\x03');
  const stopped = plain(await pty.until(/stopped \(this turn is not kept\)\n>>> $/, from));
  const stats = plain(await pty.send('/stats'));
  const generated = Number(/generated tokens: (\d+)/.exec(stats)?.[1]);
  assert.ok(generated > 0 && generated < 4000, `stopped early: ${generated} tokens; ${stopped.slice(-200)}`);
  assert.match(stats, /turns in history: 0/);
  const at = pty.raw.length;
  pty.child.stdin.write('\x03');
  await pty.until(/Ctrl-C again/, at);
  pty.child.stdin.write('\x03');
  assert.equal(await pty.exit(), 0);
});
