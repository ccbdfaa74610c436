// Preloaded by scripts/run-tests.mjs into every Node process of a test file (NODE_OPTIONS
// --import, so the processes a test spawns carry it too): at exit it appends the process's
// CPU seconds (all threads) to $RUN_TESTS_CPU_LOG. The runner sums them per file: the cost
// of a file whatever else loads the machine, where wall time depends on the neighbours.
import { appendFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

const log = process.env.RUN_TESTS_CPU_LOG;
// Worker threads load this too, and their process.cpuUsage() is the whole process's: the
// main thread alone reports.
if (log && isMainThread) {
  process.on('exit', () => {
    const { user, system } = process.cpuUsage();
    try { appendFileSync(log, `${(user + system) / 1e6}\n`); } catch { /* the runner reads what arrived */ }
  });
}
