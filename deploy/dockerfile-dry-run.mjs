#!/usr/bin/env node
// Runs deploy/Dockerfile's steps in a plain shell, for machines without a Docker daemon:
// every stage gets its own directory under a temp root standing in for "/", WORKDIR/COPY
// map into it, RUN lines run with `sh -c` there (HOME, npm's global prefix and cache point
// into the stage, ENV applies), then the final ENTRYPOINT + CMD is started and the
// HEALTHCHECK command must pass, and must fail once SIGTERM has started the drain.
// Port 8000 in CMD/HEALTHCHECK is replaced by a free port. Needs network access for
// `npm ci` as a real build does. Usage: node deploy/dockerfile-dry-run.mjs [--keep]
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';

const here = dirname(new URL(import.meta.url).pathname);
const context = resolve(here, '..');
const dockerfile = join(here, 'Dockerfile');
const ignore = readFileSync(join(here, 'Dockerfile.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
const root = mkdtempSync(join(tmpdir(), 'ds-docker-'));
const say = (s) => process.stderr.write(`dry-run: ${s}\n`);

/** Dockerfile instructions, continuation lines joined, comments dropped. */
function instructions(text) {
  const out = [];
  let cur = '';
  for (const line of text.split('\n')) {
    if (cur === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
    cur += line.replace(/\\$/, '') + (line.endsWith('\\') ? ' ' : '');
    if (!line.endsWith('\\')) {
      const m = /^(\w+)\s+(.*)$/.exec(cur.trim());
      if (m) out.push({ op: m[1].toUpperCase(), arg: m[2] });
      cur = '';
    }
  }
  return out;
}

const stages = [];
let st = null;
const inStage = (s, p) => join(s.root, p.startsWith('/') ? p : join(s.workdir, p));

function copyInto(s, from, srcs, dest) {
  const target = inStage(s, dest);
  for (const src of srcs) {
    const abs = from ? join(from.root, src) : join(context, src);
    if (src === '.' && !from) {
      mkdirSync(target, { recursive: true });
      cpSync(context, target, { recursive: true, filter: (p) => !ignore.includes(p.slice(context.length + 1).split('/')[0]) });
    } else {
      const to = dest.endsWith('/') || srcs.length > 1 ? join(target, basename(abs)) : target;
      mkdirSync(dirname(to), { recursive: true });
      cpSync(abs, src.endsWith('/') ? target : to, { recursive: true });
    }
  }
}

const freePort = () => new Promise((res) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const { port } = s.address();
    s.close(() => res(port));
  });
});

for (const { op, arg } of instructions(readFileSync(dockerfile, 'utf8'))) {
  if (op === 'FROM') {
    const [, name] = /\s+AS\s+(\S+)/i.exec(arg) ?? [];
    st = { name: name ?? String(stages.length), root: join(root, `stage-${stages.length}`), workdir: '/', env: {}, exec: null, health: null };
    mkdirSync(join(st.root, 'home'), { recursive: true });
    stages.push(st);
    say(`FROM ${arg} → ${st.root}`);
  } else if (op === 'WORKDIR') {
    st.workdir = arg;
    mkdirSync(inStage(st, '.'), { recursive: true });
  } else if (op === 'ENV') {
    for (const m of arg.matchAll(/(\w+)=("[^"]*"|\S+)/g)) st.env[m[1]] = m[2].replace(/^"|"$/g, '');
  } else if (op === 'COPY') {
    const parts = arg.split(/\s+/);
    const fromFlag = parts[0].startsWith('--from=') ? parts.shift().slice('--from='.length) : null;
    const from = fromFlag === null ? null : stages.find((s) => s.name === fromFlag);
    if (fromFlag !== null && !from) throw new Error(`COPY --from=${fromFlag}: no such stage`);
    copyInto(st, from, parts.slice(0, -1), parts.at(-1));
  } else if (op === 'RUN') {
    say(`RUN ${arg}`);
    const prefix = join(st.root, 'usr-local');
    const env = {
      ...process.env, ...st.env, HOME: join(st.root, 'home'), npm_config_prefix: prefix,
      npm_config_cache: join(st.root, 'npm-cache'), PATH: `${join(prefix, 'bin')}:${process.env.PATH}`,
    };
    const r = spawnSync('sh', ['-ec', arg], { cwd: inStage(st, '.'), env, stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`RUN failed (exit ${r.status}): ${arg}`);
  } else if (op === 'HEALTHCHECK') {
    st.health = JSON.parse(/CMD\s+(\[.*\])\s*$/.exec(arg)[1]);
  } else if (op === 'ENTRYPOINT') {
    st.entrypoint = JSON.parse(arg);
  } else if (op === 'CMD') {
    st.cmd = JSON.parse(arg);
  } else say(`${op} ${arg} (recorded only)`);
}

const port = String(await freePort());
const withPort = (args) => args.map((a) => a.replaceAll('8000', port));
const prefix = join(st.root, 'usr-local');
const env = { ...process.env, ...st.env, HOME: join(st.root, 'home'), PATH: `${join(prefix, 'bin')}:${process.env.PATH}` };
delete env.DELTASERVE_KERNELS;
const health = () => spawnSync(st.health[0], withPort(st.health.slice(1)), { env }).status;
const argv = withPort([...st.entrypoint, ...st.cmd]).map((a) => (a === '0.0.0.0' ? '127.0.0.1' : a));
say(`starting ${argv.join(' ')}`);
const server = spawn(argv[0], argv.slice(1), { cwd: inStage(st, '.'), env, stdio: ['ignore', 'inherit', 'inherit'] });
const exited = new Promise((r) => server.on('exit', (code) => r(code)));
let healthy = false;
for (let i = 0; i < 120 && !healthy; i++) {
  healthy = health() === 0;
  if (!healthy) await new Promise((r) => setTimeout(r, 500));
}
if (!healthy) throw new Error('HEALTHCHECK never passed');
say('HEALTHCHECK passes');
const drain = spawn(process.execPath, ['-e', `fetch('http://127.0.0.1:${port}/v1/completions', {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({prompt: 'hi', max_tokens: 2000, ignore_eos: true})}).then((r) => r.text())`], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 1000));
server.kill('SIGTERM');
await new Promise((r) => setTimeout(r, 200));
const during = health();
if (during === 0 && server.exitCode === null) throw new Error('HEALTHCHECK still passes while the server drains');
say(`HEALTHCHECK fails while draining (exit ${during})`);
const code = await exited;
drain.kill();
if (code !== 0) throw new Error(`the server exited ${code} after SIGTERM`);
say('SIGTERM: drained and exited 0');
if (!process.argv.includes('--keep')) rmSync(root, { recursive: true, force: true });
else say(`kept ${root}`);
say(`ok: ${existsSync(dockerfile) ? 'deploy/Dockerfile' : ''} runs in a plain shell`);
