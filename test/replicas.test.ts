// Replicas behind a real load balancer: two `deltaserve serve` processes and nginx running
// the shipped deploy/nginx.conf (its replica addresses and listen port rewritten for
// 127.0.0.1), checking that turn 2 of a session lands on the same replica and hits its
// prefix cache, that sessions spread over both replicas, and that when one replica is
// killed new requests (its sessions included) are still served. nginx must be installed
// (`npm run test:setup` installs it); without it this test fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';
import { type ServeProcess, spawnServe } from './serve-process.js';

function findNginx(): string {
  const which = spawnSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' });
  const found = which.status === 0 ? which.stdout.trim() : ['/usr/sbin/nginx', '/usr/local/sbin/nginx'].find((p) => existsSync(p));
  if (!found) {
    throw new Error('nginx is not installed: the replica test needs it: run `npm run test:setup` ' +
      '(scripts/install-test-deps.sh: apt-get, as root); otherwise install it yourself (e.g. apt-get install -y nginx)');
  }
  return found;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

type Replica = ServeProcess;

async function startReplica(): Promise<Replica> {
  return spawnServe(['--threads', '1', '--max-running', '4', '--cache-state-slots', '32', '--log-level', 'warn']);
}

/** deploy/nginx.conf with the replicas and listen port of this test, its files in `dir`,
 * and a response header naming the replica that answered (test only). */
function nginxConfig(dir: string, listen: number, replicas: readonly Replica[]): string {
  const shipped = readFileSync(join(REPO_ROOT, 'deploy', 'nginx.conf'), 'utf8');
  const servers = shipped.match(/^\s*server replica-\d+:8000 .*$/gm);
  assert.ok(servers && servers.length === 2, 'deploy/nginx.conf lists replica-1 and replica-2');
  let conf = shipped;
  replicas.forEach((r, i) => (conf = conf.replace(servers[i]!, servers[i]!.replace(/replica-\d+:8000/, `127.0.0.1:${r.port}`))));
  assert.match(conf, /listen 8080;/);
  conf = conf.replace('listen 8080;', `listen 127.0.0.1:${listen};\n        add_header X-Test-Upstream $upstream_addr always;`);
  for (const sub of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, sub));
  const paths = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k, i) => `    ${k}_temp_path ${join(dir, ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'][i]!)};`);
  conf = conf.replace(/^http \{$/m, `http {\n    access_log ${join(dir, 'access.log')};\n${paths.join('\n')}`);
  const user = process.getuid?.() === 0 ? 'user root;\n' : '';
  return `${user}pid ${join(dir, 'nginx.pid')};\nerror_log ${join(dir, 'error.log')} warn;\n${conf.replace(/^worker_processes auto;$/m, 'worker_processes 1;')}`;
}

interface Turn { status: number; upstream: string; text: string; promptTokens: number; cached: number }

async function complete(base: string, session: string | null, prompt: string): Promise<Turn> {
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...(session ? { 'x-session-id': session } : {}) },
    body: JSON.stringify({ prompt, max_tokens: 4, temperature: 0 }),
  });
  const body = (await res.json()) as { choices?: { text: string }[]; usage?: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } };
  return {
    status: res.status, upstream: res.headers.get('x-test-upstream') ?? '', text: body.choices?.[0]?.text ?? '',
    promptTokens: body.usage?.prompt_tokens ?? 0, cached: body.usage?.prompt_tokens_details.cached_tokens ?? 0,
  };
}

/** A session's first prompt: long enough (> 256 tokens) to pass a state snapshot boundary. */
const opening = (s: number): string => `Session ${s}. ` + Array.from({ length: 40 }, (_, i) => `item ${(i * 7 + s) % 97} is`).join(', ') + '.';

test('nginx + 2 replicas: session affinity keeps hitting the prefix cache, sessions spread, a dead replica is skipped', { timeout: 180_000 }, async (t) => {
  const nginx = findNginx();
  const dir = mkdtempSync(join(tmpdir(), 'ds-replicas-'));
  const procs: ChildProcess[] = [];
  t.after(async () => {
    // nginx gets SIGTERM (fast shutdown: the master stops its workers); replicas SIGKILL.
    const gone = procs.filter((p) => p.exitCode === null && p.signalCode === null).map((p) => new Promise((r) => p.once('exit', r)));
    for (const p of procs) if (p.exitCode === null) p.kill(p.spawnfile === nginx ? 'SIGTERM' : 'SIGKILL');
    await Promise.race([Promise.all(gone), new Promise((r) => setTimeout(r, 5_000))]);
    rmSync(dir, { recursive: true, force: true });
  });
  const replicas = await Promise.all([startReplica(), startReplica()]);
  procs.push(...replicas.map((r) => r.proc));
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(dir, port, replicas));
  const test = spawnSync(nginx, ['-t', '-p', dir, '-c', conf, '-e', join(dir, 'error.log')], { encoding: 'utf8' });
  assert.equal(test.status, 0, `nginx -t: ${test.stderr}`);
  const lb = spawn(nginx, ['-p', dir, '-c', conf, '-e', join(dir, 'error.log'), '-g', 'daemon off;'], { stdio: ['ignore', 'inherit', 'inherit'] });
  procs.push(lb);
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if ((await fetch(`${base}/health`).then((r) => r.status, () => 0)) === 200) break;
    if (i > 100) throw new Error(`nginx did not answer on ${base}: ${readFileSync(join(dir, 'error.log'), 'utf8')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const addr = new Map(replicas.map((r) => [`127.0.0.1:${r.port}`, r]));

  // Turn 1 of 8 sessions (more, one by one, in the unlikely case that the hash put them
  // all on one replica), then turn 2 (turn 1 + its answer + a new question).
  const sessions = Array.from({ length: 8 }, (_, s) => s);
  const first = await Promise.all(sessions.map((s) => complete(base, `session-${s}`, opening(s))));
  while (new Set(first.map((f) => f.upstream)).size < 2 && sessions.length < 40) {
    sessions.push(sessions.length);
    first.push(await complete(base, `session-${sessions.length - 1}`, opening(sessions.length - 1)));
  }
  for (const f of first) {
    assert.equal(f.status, 200);
    assert.ok(addr.has(f.upstream), `answered by a replica: ${f.upstream}`);
    assert.ok(f.promptTokens > 256, `turn 1 is ${f.promptTokens} tokens`);
  }
  assert.equal(new Set(first.map((f) => f.upstream)).size, 2, 'sessions spread over both replicas');
  const second = await Promise.all(sessions.map((s) => complete(base, `session-${s}`, `${opening(s)}${first[s]!.text} And then item ${s}?`)));
  sessions.forEach((s) => {
    assert.equal(second[s]!.status, 200);
    assert.equal(second[s]!.upstream, first[s]!.upstream, `session ${s} stays on its replica`);
    assert.ok(second[s]!.cached > 0, `session ${s} turn 2 hits the prefix cache (cached_tokens ${second[s]!.cached})`);
  });

  // Kill the replica of session 0: its sessions and new ones are served by the other.
  const dead = addr.get(first[0]!.upstream)!;
  const alive = replicas.find((r) => r !== dead)!;
  dead.proc.kill('SIGKILL');
  await new Promise<void>((r) => (dead.proc.exitCode !== null ? r() : dead.proc.once('exit', () => r())));
  const after = await Promise.all(sessions.map((s) => complete(base, `new-${s}`, `Question ${s}: what is ${s} + 1?`)));
  const pinned = await complete(base, 'session-0', `${opening(0)}${first[0]!.text} And one more?`);
  for (const r of [...after, pinned]) {
    assert.equal(r.status, 200);
    assert.ok(r.upstream.endsWith(`127.0.0.1:${alive.port}`), `served by the live replica (upstream "${r.upstream}")`);
  }
});
