// The CLI explains itself and agrees with the server: `<command> --help` / `-h` /
// `help <command>` for every command (every shared engine flag listed), `--version` from
// package.json, negative numbers parse, and a flag is refused exactly when the matching API
// field is, with the same message (one definition: src/engine/request-rules.ts).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINE_FLAGS } from '../src/cli/engine-flags.js';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { KERNELS, post } from './server-helpers.js';

const COMMANDS = ['serve', 'chat', 'generate', 'eval', 'make-model', 'bench'];
const ENGINE_COMMANDS = ['serve', 'chat', 'generate', 'eval'];

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], {
    encoding: 'utf8', env: { ...process.env, DELTASERVE_KERNELS: KERNELS },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

let engine: Engine;
let server: RunningServer;
before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 2 });
  server = await startServer(engine, { port: 0 });
});
after(async () => {
  await server.close();
  await engine.close();
});

test('--help, -h and help <command> for every command; top-level help lists them all', () => {
  for (const cmd of COMMANDS) {
    const long = cli([cmd, '--help']);
    assert.equal(long.status, 0, `${cmd} --help: ${long.stderr}`);
    assert.match(long.stdout, new RegExp(`^deltaserve ${cmd}\\b`), cmd);
    assert.equal(cli([cmd, '-h']).stdout, long.stdout, `${cmd} -h`);
    assert.equal(cli(['help', cmd]).stdout, long.stdout, `help ${cmd}`);
    if (ENGINE_COMMANDS.includes(cmd)) {
      for (const flag of Object.keys(ENGINE_FLAGS)) assert.match(long.stdout, new RegExp(`--${flag}\\b`), `${cmd} --help lists --${flag}`);
    }
  }
  const top = cli(['--help']);
  assert.equal(top.status, 0);
  for (const cmd of COMMANDS) assert.match(top.stdout, new RegExp(`^  ${cmd} `, 'm'));
  assert.equal(cli([]).stdout, top.stdout);
  assert.match(cli(['serve', '--help']).stdout, /--allowed-origins[\s\S]*--metrics-no-auth[\s\S]*--log-level[\s\S]*--log-prompts/);
});

test('--version prints the package version', () => {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
  const r = cli(['--version']);
  assert.equal(r.status, 0);
  assert.equal(r.stdout, `deltaserve ${pkg.version}\n`);
  assert.equal(cli(['version']).stdout, r.stdout);
});

test('a flag is refused exactly like the API field, with the same message (negative numbers included)', async () => {
  // [flag, CLI value, API field, API value]
  const cases: [string, string, string, number][] = [
    ['temperature', '-1', 'temperature', -1],
    ['temperature', '5', 'temperature', 5],
    ['top-p', '0', 'top_p', 0],
    ['top-k', '1.5', 'top_k', 1.5],
    ['min-p', '-0.25', 'min_p', -0.25],
    ['presence-penalty', '-3', 'presence_penalty', -3],
    ['repetition-penalty', '0', 'repetition_penalty', 0],
    ['seed', '2.5', 'seed', 2.5],
    ['max-tokens', '0', 'max_tokens', 0],
    ['max-tokens', '99999', 'max_tokens', 99999],
  ];
  for (const [flag, cliValue, field, apiValue] of cases) {
    const api = await post(`${server.url}/v1/completions`, { prompt: 'hi', [field]: apiValue, ...(field === 'max_tokens' ? {} : { max_tokens: 2 }) });
    assert.equal(api.status, 400, `${field}=${apiValue}`);
    const apiMessage = (api.json['error'] as { message: string }).message;
    const r = cli(['generate', '--prompt', 'hi', `--${flag}`, cliValue, '--max-tokens', flag === 'max-tokens' ? cliValue : '2']);
    assert.equal(r.status, 2, `--${flag} ${cliValue}: ${r.stderr}`);
    assert.ok(apiMessage.startsWith(`${field} `), apiMessage);
    // generate prints its memory plan on stderr once the model is loaded: the error is the only other line
    const errorLines = r.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('deltaserve: memory plan:'));
    assert.deepEqual(errorLines, [`deltaserve: --${flag}${apiMessage.slice(field.length)}`], `--${flag} ${cliValue}`);
  }
});

test('negative values in range are accepted by the CLI as by the API', async () => {
  const r = cli(['generate', '--prompt', 'hi', '--max-tokens', '3', '--top-k', '-1', '--presence-penalty', '-0.5', '--frequency-penalty', '-1', '--json']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal((JSON.parse(r.stdout) as { usage: { completion_tokens: number } }).usage.completion_tokens, 3);
  const api = await post(`${server.url}/v1/completions`, { prompt: 'hi', max_tokens: 3, top_k: -1, presence_penalty: -0.5, frequency_penalty: -1 });
  assert.equal(api.status, 200);
});
