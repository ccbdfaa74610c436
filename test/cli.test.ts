// The CLI contract: generate --json shape, chat answer format, --batch-file in input
// order, clear errors for bad flags.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT, sharedPath } from './paths.js';

const KERNELS = process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm';

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], {
    encoding: 'utf8', env: { ...process.env, DELTASERVE_KERNELS: KERNELS },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('generate --messages answers with reasoning, </think>, then an answer (default model)', () => {
  const r = cli(['generate', '--messages', '[{"role":"user","content":"What is 12 + 30?"}]', '--json']);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { text: string; finish_reason: string; prompt_ids: number[]; output_ids: number[] };
  assert.equal(out.finish_reason, 'stop');
  const [reasoning, answer] = out.text.split('</think>');
  assert.ok(reasoning!.trim().length > 0, 'reasoning inside <think>');
  assert.match(answer!.trim(), /^\d+$/, 'a numeric answer after </think>');
  assert.ok(out.prompt_ids.length > 0 && out.output_ids.length > 0);
});

test('generate --prompt is one user message under the chat template; --raw sends the text as is', () => {
  const q = 'What is 12 + 30?';
  const asChat = cli(['generate', '--prompt', q, '--max-tokens', '40', '--json']);
  const asMessages = cli(['generate', '--messages', JSON.stringify([{ role: 'user', content: q }]), '--max-tokens', '40', '--json']);
  const raw = cli(['generate', '--prompt', q, '--raw', '--max-tokens', '4', '--json']);
  for (const r of [asChat, asMessages, raw]) assert.equal(r.status, 0, r.stderr);
  type Out = { prompt_ids: number[]; output_ids: number[]; text: string; reasoning: string | null; content: string };
  const [c, m, w] = [asChat, asMessages, raw].map((r) => JSON.parse(r.stdout) as Out);
  assert.deepEqual(c!.prompt_ids, m!.prompt_ids, 'the same prompt as one user message');
  assert.deepEqual(c!.output_ids, m!.output_ids);
  assert.ok(w!.prompt_ids.length < c!.prompt_ids.length, 'no template around the raw text');
  // --json carries the reasoning and the answer apart; the text keeps the tags
  assert.ok(c!.reasoning !== null && c!.reasoning.trim().length > 0);
  assert.match(c!.content, /^\d+$/);
  assert.ok(c!.text.endsWith(`</think>\n\n${c!.content}`), c!.text);
  const bad = cli(['generate', '--messages', '[]', '--raw']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--raw applies to --prompt/);
});

test('generate text piped: the answer alone on stdout, the reasoning on stderr', () => {
  const q = 'What is 12 + 30?';
  const json = JSON.parse(cli(['generate', '--prompt', q, '--max-tokens', '40', '--json']).stdout) as { reasoning: string; content: string };
  const r = cli(['generate', '--prompt', q, '--max-tokens', '40']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, `${json.content}\n`);
  assert.ok(r.stderr.includes(json.reasoning.trim()), r.stderr);
  assert.doesNotMatch(r.stdout + r.stderr, /<\/?think>|\x1b\[/, 'no tags, no escapes in a pipe');
});

test('generate --dump-logits adds last_logits over vocab_size and mtp_top', () => {
  const r = cli(['generate', '--prompt-ids', '996,271,10', '--max-tokens', '2', '--json', '--dump-logits']);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { last_logits: number[]; mtp_top: [number, number][]; output_ids: number[] };
  assert.equal(out.last_logits.length, 1024);
  assert.equal(out.mtp_top.length, 10);
  const argmax = out.last_logits.indexOf(Math.max(...out.last_logits));
  assert.equal(out.output_ids[0], argmax);
});

test('generate --batch-file with 32 eval prompts prints 32 lines in input order', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ds-batch-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const lines = ['add', 'mcq', 'recall'].flatMap((t) => readFileSync(sharedPath('eval', `${t}.public.jsonl`), 'utf8').trim().split('\n').slice(0, 11)).slice(0, 32);
  const file = join(dir, 'prompts.jsonl');
  writeFileSync(file, lines.join('\n') + '\n');
  const r = cli(['generate', '--batch-file', file, '--max-tokens', '12', '--max-running', '8']);
  assert.equal(r.status, 0, r.stderr);
  const outs = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { prompt_ids: number[]; output_ids: number[] });
  assert.equal(outs.length, 32);
  // input order: each line's prompt is that line's rendered messages (first one checked by ids length order)
  const single = cli(['generate', '--messages', JSON.stringify((JSON.parse(lines[5]!) as { messages: unknown }).messages), '--max-tokens', '12', '--json']);
  assert.deepEqual((JSON.parse(single.stdout) as { output_ids: number[] }).output_ids, outs[5]!.output_ids);
  assert.deepEqual((JSON.parse(single.stdout) as { prompt_ids: number[] }).prompt_ids, outs[5]!.prompt_ids);
});

test('bad flags and bad models give one clear line, not a stack trace', () => {
  const cases: [string[], RegExp][] = [
    [['generate', '--prompt', 'hi', '--max-tokens', 'abc'], /--max-tokens expects a number/],
    [['generate'], /give one of --prompt/],
    [['generate', '--prompt', 'hi', '--model', '/nonexistent'], /model directory not found: \/nonexistent/],
    [['generate', '--prompt', 'hi', '--bogus'], /Unknown option '--bogus'/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['generate', '--batch-file', '/nonexistent/prompts.jsonl'], /--batch-file file \/nonexistent\/prompts\.jsonl does not exist/],
    [['generate', '--prompt', 'hi', '--kernels', 'gpu'], /--kernels must be one of auto, cpu, ref, wasm, webgpu \(got "gpu"\)/],
    [['serve', '--log-level', 'loud'], /--log-level must be one of debug, info, warn, error, silent/],
    [['serve', '--allowed-origins', 'https://a.example/path'], /--allowed-origins: .*no path/],
    [['make-model', '--shape', 'tiny'], /make-model needs --shape and --out/],
  ];
  for (const [args, msg] of cases) {
    const r = cli(args);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, msg);
    assert.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /^\s+at /m, 'no stack trace');
  }
});
