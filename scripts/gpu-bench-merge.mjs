// scripts/gpu-bench.sh's last step: every step's JSON (DIR/NAME.json) into one object on
// stdout — the machine (CPU, nvidia-smi's GPU when there is one, Node), the adapter the
// benches ran on, and the runs by name (a failed step is {"error": ...}).
// Usage: node gpu-bench-merge.mjs DIR MODE SECONDS
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';

const [dir, mode, seconds] = process.argv.slice(2);
if (!dir) throw new Error('usage: gpu-bench-merge.mjs DIR MODE SECONDS');

function nvidiaSmi() {
  try {
    return execFileSync('nvidia-smi', ['--query-gpu=name,memory.total,driver_version', '--format=csv,noheader'], { encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

const runs = {};
let adapter = null;
for (const f of readdirSync(dir).filter((n) => n.endsWith('.json')).sort()) {
  const name = f.slice(0, -'.json'.length);
  try {
    const r = JSON.parse(readFileSync(join(dir, f), 'utf8'));
    if (r && typeof r === 'object' && r.adapter) {
      adapter ??= r.adapter;
      delete r.adapter; // once, at the top
    }
    runs[name] = r;
  } catch (e) {
    runs[name] = { error: `unreadable step output: ${e.message}` };
  }
}
const failed = Object.entries(runs).filter(([, r]) => r && r.error).map(([n]) => n);
process.stdout.write(`${JSON.stringify({
  what: 'scripts/gpu-bench.sh', mode, date: new Date().toISOString(), seconds: Number(seconds),
  machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memory_gb: totalmem() / 2 ** 30, gpu: nvidiaSmi(), node: process.version },
  adapter, failed, runs,
}, null, 1)}\n`);
