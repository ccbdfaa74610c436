// Runs the compiled test files (dist/test/**/*.test.js) with node's test runner, tier by tier
// (scripts/test-tiers.mjs), each file in its own process, up to the tier's concurrency at once.
//
//   node scripts/run-tests.mjs                 every tier in order; stops after the first tier with a failure
//   node scripts/run-tests.mjs --tier fast     one tier (npm run test:fast)
//   node scripts/run-tests.mjs SUBSTRING...    the files whose path contains any SUBSTRING, whatever their tier
//   node scripts/run-tests.mjs --list          each file's tier
//   node scripts/run-tests.mjs --check         exits 1 unless every file is in exactly one tier
//   --concurrency N                            overrides every tier's concurrency
//
// Output: each file's spec report, contiguous (the oldest running file streams live, the
// others are held until it ends), then one line per file; the run ends with a summary that
// counts every file of every tier run, its last line `N passed, N failed[, N skipped]`.
// Per-file wall and CPU seconds go to .cache/test-times.json ({ NAME: { wall, cpu } }; the next
// run starts the longest wall first; CPU is the steadier cost on a shared machine).
// Installs nothing: system programs come from `npm run test:setup`.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { spawn } from 'node:child_process';
import { TIERS, assignTiers, fileEnvOf, matches } from './test-tiers.mjs';

const root = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..');
const distTest = join(root, 'dist', 'test');
const timesFile = join(root, '.cache', 'test-times.json');
const cpuDir = mkdtempSync(join(tmpdir(), 'run-tests-cpu-'));
process.on('exit', () => rmSync(cpuDir, { recursive: true, force: true }));
/** A file still running after this long is killed and counted as failed (a hang). On a clean
 * machine the Mesa shader cache is cold: lavapipe's LLVM compiles every pipeline once, and the
 * files that force a GPU's launch variants (webgpu-*-fold) spent 45 % of their time in libLLVM,
 * 680–900 s each on this 2-core VM (2026-12-06) against ~120 s warm; 25 min leaves them room. */
const FILE_TIMEOUT_MS = 25 * 60_000;
/** Process groups of the running files: each file runs in its own group (node --test runs the
 * file in a grandchild, and a test may start servers), so a timeout or an interrupted run
 * kills all of it, never leaving an orphan that loads the machine. */
const liveGroups = new Set();
const killGroup = (pid) => { try { process.kill(-pid, 'SIGKILL'); } catch { /* already gone */ } };
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => { for (const pid of liveGroups) killGroup(pid); process.exit(130); });
}

function parseArgs(argv) {
  const opts = { tier: null, filters: [], list: false, check: false, concurrency: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--tier') opts.tier = argv[++i];
    else if (a === '--list') opts.list = true;
    else if (a === '--check') opts.check = true;
    else if (a === '--concurrency') opts.concurrency = Number(argv[++i]);
    else if (a.startsWith('--')) fail(`unknown option ${a}`);
    else opts.filters.push(a);
  }
  if (opts.tier !== null && !TIERS.some((t) => t.name === opts.tier)) fail(`--tier ${opts.tier}: no such tier (have ${TIERS.map((t) => t.name).join(', ')})`);
  if (opts.concurrency !== null && !(Number.isInteger(opts.concurrency) && opts.concurrency >= 1)) fail('--concurrency takes a whole number ≥ 1');
  return opts;
}

function fail(message) {
  console.error(`run-tests: ${message}`);
  process.exit(1);
}

function walk(d) {
  return readdirSync(d).flatMap((n) => {
    const p = join(d, n);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith('.test.js') ? [p] : [];
  });
}

/** Test name of a compiled file: its path under dist/test without .test.js. */
const nameOf = (file) => relative(distTest, file).replace(/\.test\.js$/, '');

/** Recorded { wall, cpu } seconds per file (an older file's bare numbers are wall times). */
function readTimes() {
  let raw = {};
  try { raw = JSON.parse(readFileSync(timesFile, 'utf8')); } catch { return {}; }
  return Object.fromEntries(Object.entries(raw).map(([n, v]) => [n, typeof v === 'number' ? { wall: v, cpu: null } : v]));
}

/**
 * Longest first by recorded time; a file with no record yet (a fresh clone, a new test) counts
 * as longest, and among those the tier's slowFirst hint leads, then the name.
 */
function order(tier, names, times) {
  const hint = (n) => { const i = (tier.slowFirst ?? []).findIndex((p) => matches(p, n)); return i < 0 ? Infinity : i; };
  const time = (n) => times[n]?.wall ?? Infinity;
  return [...names].sort((a, b) => (time(b) === time(a) ? 0 : time(b) > time(a) ? 1 : -1) || hint(a) - hint(b) || a.localeCompare(b));
}

const SUMMARY_LINE = /^ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)$/;

/** Runs one file with its tier's `fileEnv` (a variable already set here wins); `sink` receives
 * its output lines (minus node's per-file summary). */
function runFile(name, fileEnv, sink) {
  const started = Date.now();
  const env = { ...fileEnv, ...process.env };
  delete env.NODE_TEST_CONTEXT; // a runner above us would take the reports instead of stdout
  const cpuLog = join(cpuDir, `${name.replaceAll('/', '_')}.txt`);
  env.RUN_TESTS_CPU_LOG = cpuLog;
  env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ''} --import=${pathToFileURL(join(root, 'scripts', 'cpu-probe.mjs')).href}`.trim();
  const child = spawn(process.execPath, ['--test', '--test-reporter=spec', join(distTest, `${name}.test.js`)], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  liveGroups.add(child.pid);
  const counts = {};
  const partial = { stdout: '', stderr: '' }; // a line may come in pieces; streams are split apart
  const onData = (stream) => (chunk) => {
    const lines = (partial[stream] + chunk.toString('utf8')).split('\n');
    partial[stream] = lines.pop() ?? '';
    for (const line of lines) {
      const m = stream === 'stdout' ? SUMMARY_LINE.exec(line) : null;
      if (m) counts[m[1]] = Number(m[2]);
      else sink(line);
    }
  };
  child.stdout.on('data', onData('stdout'));
  child.stderr.on('data', onData('stderr'));
  const timer = setTimeout(() => { sink(`run-tests: ${name} still running after ${FILE_TIMEOUT_MS / 60_000} min: killed`); killGroup(child.pid); }, FILE_TIMEOUT_MS);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      killGroup(child.pid); // whatever the file left running (a server it did not stop)
      liveGroups.delete(child.pid);
      for (const rest of Object.values(partial)) if (rest) sink(rest);
      const seconds = (Date.now() - started) / 1000;
      const pass = counts.pass ?? 0;
      let failed = (counts.fail ?? 0) + (counts.cancelled ?? 0);
      // A file that died before its summary, or exited non-zero with no failed test, is one failure.
      if ((code !== 0 || signal) && failed === 0) failed = 1;
      if (counts.tests === undefined && code === 0) { failed = 1; sink(`run-tests: ${name} printed no test summary`); }
      const cpu = existsSync(cpuLog) ? readFileSync(cpuLog, 'utf8').split('\n').filter(Boolean).reduce((a, l) => a + Number(l), 0) : 0;
      resolve({ name, pass, failed, skipped: (counts.skipped ?? 0) + (counts.todo ?? 0), seconds, cpu, code, signal });
    });
  });
}

/**
 * Runs files up to `concurrency` at once (`alone` files with nothing beside them). The oldest
 * running file prints live; the others are held and printed, whole, when their turn comes.
 */
async function runTier(tier, names, concurrency) {
  const queue = [...names];
  const isAlone = (n) => (tier.alone ?? []).some((p) => matches(p, n));
  const running = []; // { name, lines: string[], done: result | null }, in start order
  const results = [];
  let wake = () => {};
  const printed = (entry) => {
    for (const l of entry.lines) console.log(l);
    entry.lines = [];
  };
  const footer = (r) => console.log(`${r.failed ? '✖' : '✔'} ${r.name}.test.js: ${r.pass} passed, ${r.failed} failed${r.skipped ? `, ${r.skipped} skipped` : ''} (${r.seconds.toFixed(1)} s, ${r.cpu.toFixed(1)} s CPU)\n`);
  const flush = () => {
    while (running.length) {
      const head = running[0];
      printed(head);
      if (!head.done) return;
      footer(head.done);
      running.shift();
    }
  };
  while (queue.length || running.length) {
    const canStart = () => {
      if (!queue.length) return false;
      if (running.length === 0) return true;
      if (running.length >= concurrency || running.some((e) => isAlone(e.name))) return false;
      return !isAlone(queue[0]);
    };
    // An `alone` file waits for the others to end; files behind it that may share go first
    // (checked before each start: the file just started may be the one an alone file waits on).
    const shareFirst = () => {
      if (queue.length && running.length && running.length < concurrency && isAlone(queue[0]) && !running.some((e) => isAlone(e.name))) {
        const i = queue.findIndex((n) => !isAlone(n));
        if (i > 0) queue.unshift(queue.splice(i, 1)[0]);
      }
      return canStart();
    };
    while (shareFirst()) {
      const entry = { name: queue.shift(), lines: [], done: null };
      running.push(entry);
      runFile(entry.name, fileEnvOf(tier, entry.name), (line) => { if (entry === running[0]) console.log(line); else entry.lines.push(line); })
        .then((r) => { entry.done = r; results.push(r); wake(); });
    }
    flush();
    if (!running.length) continue;
    await new Promise((r) => { wake = r; });
    flush();
  }
  return results;
}

const opts = parseArgs(process.argv.slice(2));
if (!existsSync(distTest)) fail('dist/test is missing: run `npm run build` first');
// A compiled test whose source is gone (renamed or deleted since the last build) would run
// stale code: leave it out, and say so.
const compiled = walk(distTest).map(nameOf).sort();
const allNames = compiled.filter((n) => existsSync(join(root, 'test', `${n}.test.ts`)));
for (const n of compiled.filter((c) => !allNames.includes(c))) console.error(`run-tests: ignoring dist/test/${n}.test.js: test/${n}.test.ts is gone (a stale build output)`);
const { byTier, errors } = assignTiers(allNames);

if (opts.check) {
  for (const e of errors) console.error(`run-tests --check: ${e}`);
  if (errors.length) process.exit(1);
  console.log(`run-tests --check: ${allNames.length} test files, each in exactly one tier (${TIERS.map((t) => `${t.name} ${byTier.get(t.name).length}`).join(', ')})`);
  process.exit(0);
}
if (opts.list) {
  for (const t of TIERS) console.log(`${t.name} (${t.what}):\n  ${byTier.get(t.name).join('\n  ')}`);
  process.exit(errors.length ? 1 : 0);
}
if (errors.length) fail(`the tier table is inconsistent (scripts/test-tiers.mjs):\n  ${errors.join('\n  ')}`);

const plan = TIERS
  .filter((t) => opts.tier === null || t.name === opts.tier)
  .map((t) => ({ tier: t, names: byTier.get(t.name).filter((n) => !opts.filters.length || opts.filters.some((f) => `dist/test/${n}.test.js`.includes(f))) }))
  .filter((p) => p.names.length);
if (!plan.length) fail(`no test files found${opts.filters.length ? ` matching ${opts.filters.join(', ')}` : ''}`);

const times = readTimes();
const started = Date.now();
const tierResults = [];
let stoppedAt = null;
console.log(`run-tests: node ${process.version} (${process.execPath}); tiers ${plan.map((p) => `${p.tier.name} (${p.names.length} files)`).join(', ')}\n`);
for (const [i, { tier, names }] of plan.entries()) {
  const concurrency = opts.concurrency ?? tier.concurrency;
  console.log(`━━ tier ${tier.name}: ${names.length} files, ${concurrency} at a time — ${tier.what}\n`);
  const t0 = Date.now();
  const results = await runTier(tier, order(tier, names, times), concurrency);
  for (const r of results) times[r.name] = { wall: Math.round(r.seconds * 10) / 10, cpu: Math.round(r.cpu * 10) / 10 };
  tierResults.push({ tier, results, seconds: (Date.now() - t0) / 1000 });
  if (results.some((r) => r.failed) && i < plan.length - 1) { stoppedAt = plan.slice(i + 1); break; }
}
mkdirSync(dirname(timesFile), { recursive: true });
writeFileSync(timesFile, `{\n${Object.entries(times).sort().map(([n, t]) => ` ${JSON.stringify(n)}: ${JSON.stringify(t)}`).join(',\n')}\n}\n`);

const all = tierResults.flatMap((t) => t.results);
const sum = (k) => all.reduce((a, r) => a + r[k], 0);
const failedFiles = all.filter((r) => r.failed);
console.log('━━ summary');
for (const { tier, results, seconds } of tierResults) {
  const f = results.reduce((a, r) => a + r.failed, 0);
  console.log(`tier ${tier.name}: ${results.length} files, ${results.reduce((a, r) => a + r.pass, 0)} passed, ${f} failed, ${seconds.toFixed(1)} s (${results.reduce((a, r) => a + r.cpu, 0).toFixed(0)} s CPU in its Node processes)`);
}
const costliest = [...all].sort((x, y) => y.cpu - x.cpu).slice(0, 8);
if (all.length > 1) console.log(`costliest files (CPU s / wall s): ${costliest.map((r) => `${r.name} ${r.cpu.toFixed(0)}/${r.seconds.toFixed(0)}`).join(', ')}`);
if (stoppedAt) console.log(`not run, because tier ${tierResults.at(-1).tier.name} failed: ${stoppedAt.map((p) => `${p.tier.name} (${p.names.length} files)`).join(', ')}`);
for (const r of failedFiles) console.log(`✖ failed: dist/test/${r.name}.test.js (${r.failed}${r.signal ? `, ${r.signal}` : ''})`);
console.log(`ℹ files ${all.length}`);
console.log(`ℹ tests ${sum('pass') + sum('failed') + sum('skipped')}`);
console.log(`ℹ pass ${sum('pass')}`);
console.log(`ℹ fail ${sum('failed')}`);
console.log(`ℹ skipped ${sum('skipped')}`);
console.log(`ℹ duration_ms ${Date.now() - started}`);
console.log(`${sum('pass')} passed, ${sum('failed')} failed${sum('skipped') ? `, ${sum('skipped')} skipped` : ''}`);
process.exit(failedFiles.length || stoppedAt ? 1 : 0);
