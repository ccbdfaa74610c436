// Builds the WebAssembly kernel variants of asconfig.json (plain, fma, vnni) in parallel, one
// asc process each, and skips a variant whose inputs did not change since it was built.
//
// Inputs of a variant: every file under assembly/, asconfig.json, and the AssemblyScript
// version. Their SHA-256 (with the target name) is written beside the output as
// OUTFILE.inputs-sha256 after a successful build; a build runs unless that stamp matches and
// the output exists. A fresh clone has no build/, so it always builds from source.
//
//   node scripts/build-wasm.mjs            the variants whose inputs changed
//   node scripts/build-wasm.mjs --force    all of them
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { spawn } from 'node:child_process';

const root = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..');
const force = process.argv.includes('--force');
const config = JSON.parse(readFileSync(join(root, 'asconfig.json'), 'utf8'));
const require = createRequire(join(root, 'package.json'));
const ascPackage = require.resolve('assemblyscript/package.json');
const ascVersion = JSON.parse(readFileSync(ascPackage, 'utf8')).version;
const ascBin = join(ascPackage, '..', 'bin', 'asc.js');

function walk(d) {
  return readdirSync(d).sort().flatMap((n) => {
    const p = join(d, n);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

/** Hash of everything a variant's output depends on. */
function inputsHash(target) {
  const h = createHash('sha256');
  h.update(`assemblyscript ${ascVersion}\ntarget ${target}\n`);
  for (const file of [join(root, 'asconfig.json'), ...walk(join(root, 'assembly'))]) {
    h.update(`${relative(root, file)}\n`);
    h.update(readFileSync(file));
  }
  return h.digest('hex');
}

function build(target) {
  const outFile = join(root, config.targets[target].outFile);
  const stamp = `${outFile}.inputs-sha256`;
  const hash = inputsHash(target);
  if (!force && existsSync(outFile) && existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === hash) {
    console.log(`build-wasm: ${target}: ${relative(root, outFile)} is up to date (inputs unchanged)`);
    return Promise.resolve(0);
  }
  rmSync(stamp, { force: true }); // a failed build must not leave an old stamp beside a new, broken output
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [ascBin, '--config', 'asconfig.json', '--target', target], { cwd: root, stdio: 'inherit' });
    child.on('close', (code) => {
      if (code === 0) {
        writeFileSync(stamp, `${hash}\n`);
        console.log(`build-wasm: ${target}: built ${relative(root, outFile)} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      } else {
        console.error(`build-wasm: ${target}: asc exited with ${code}`);
      }
      resolve(code ?? 1);
    });
  });
}

const codes = await Promise.all(Object.keys(config.targets).map(build));
process.exit(codes.some((c) => c !== 0) ? 1 : 0);
