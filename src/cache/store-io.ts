// File I/O of the prefix-cache store, written so that no fault loses the saved cache:
// every write is checked for its full length; a save goes to a temporary file that is
// fsynced, renamed over the old file, and the directory fsynced; any failure removes the
// temporary file and leaves the old file as it was. The file system is a parameter
// (FileIo) so tests can inject short writes and failures. The cache holds the KV of user
// prompts: files are created 0600, directories the store creates 0700.
import * as fs from 'node:fs';
import { createHash, type Hash } from 'node:crypto';
import { basename, dirname, join, resolve } from 'node:path';

/** The synchronous file operations the store uses (node:fs by default). */
export interface FileIo {
  /** `mode` applies when the file is created. */
  openSync(path: string, flags: string, mode?: number): number;
  writeSync(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number;
  fsyncSync(fd: number): void;
  closeSync(fd: number): void;
  renameSync(from: string, to: string): void;
  unlinkSync(path: string): void;
  mkdirSync(path: string, mode?: number): void;
  statSync(path: string): { isDirectory(): boolean };
  readdirSync(path: string): string[];
}

export const NODE_IO: FileIo = {
  openSync: (p, f, m) => fs.openSync(p, f, m),
  writeSync: (fd, b, o, l, p) => fs.writeSync(fd, b, o, l, p),
  fsyncSync: (fd) => fs.fsyncSync(fd),
  closeSync: (fd) => fs.closeSync(fd),
  renameSync: (a, b) => fs.renameSync(a, b),
  unlinkSync: (p) => fs.unlinkSync(p),
  mkdirSync: (p, m) => fs.mkdirSync(p, m),
  statSync: (p) => fs.statSync(p),
  readdirSync: (p) => fs.readdirSync(p),
};

/** Mode of the files the store writes (user data: owner only). */
export const FILE_MODE = 0o600;
/** Mode of the directories the store creates. */
export const DIR_MODE = 0o700;

const errCode = (e: unknown): string | undefined => (e as { code?: string } | null)?.code;

/** Write all of `buf` at `position`; a write that makes no progress is an error (a full
 * disk reports a short write, then ENOSPC). */
export function writeFully(io: FileIo, fd: number, buf: Uint8Array, position: number, file: string): void {
  let done = 0;
  while (done < buf.byteLength) {
    const n = io.writeSync(fd, buf, done, buf.byteLength - done, position + done);
    if (!(n > 0)) throw new Error(`short write to ${file}: ${done + Math.max(0, n)} of ${buf.byteLength} bytes written at byte ${position}`);
    done += n;
  }
}

/** fsync a directory so a rename in it is durable; file systems that cannot (EINVAL) are
 * accepted, any other error is not. */
export function fsyncDir(io: FileIo, dir: string): void {
  const fd = io.openSync(dir, 'r');
  try {
    io.fsyncSync(fd);
  } catch (e) {
    if (errCode(e) !== 'EINVAL' && errCode(e) !== 'ENOTSUP') throw e;
  } finally {
    io.closeSync(fd);
  }
}

/** Temporary file of a save by process `pid`. */
export const tempName = (file: string, pid: number): string => `${file}.tmp-${pid}`;

/** One save of `file`: `head` first (its `digestAt` bytes hold a 64-character placeholder
 * for the hex sha256 of hashPrefix + everything appended), then the appended body. finish()
 * writes the digest into the head and moves the file into place. Any error closes and
 * removes the temporary file and is rethrown naming the file: the old file is untouched. */
export class StoreFileWriter {
  private fd: number | null = null;
  private readonly hash: Hash;
  private pos: number;
  readonly tmp: string;

  constructor(private readonly io: FileIo, readonly file: string, private readonly head: Buffer, private readonly digestAt: number,
    hashPrefix: string, pid = process.pid) {
    this.tmp = tempName(file, pid);
    this.hash = createHash('sha256').update(hashPrefix);
    this.pos = head.length;
    this.guard('creating', () => {
      this.fd = io.openSync(this.tmp, 'w', FILE_MODE);
      writeFully(io, this.fd, head, 0, this.tmp);
    });
  }

  append(bytes: Uint8Array): void {
    this.guard('writing', () => {
      this.hash.update(bytes);
      writeFully(this.io, this.openFd(), bytes, this.pos, this.tmp);
      this.pos += bytes.byteLength;
    });
  }

  /** Bytes of the finished file. */
  finish(): number {
    this.guard('finishing', () => {
      const fd = this.openFd();
      const digest = Buffer.from(this.hash.digest('hex'), 'latin1');
      writeFully(this.io, fd, digest, this.digestAt, this.tmp);
      this.io.fsyncSync(fd);
      this.fd = null;
      this.io.closeSync(fd);
      this.io.renameSync(this.tmp, this.file);
    });
    // the new file is in place; only its durability is left to settle
    try {
      fsyncDir(this.io, dirname(this.file));
    } catch (e) {
      throw new Error(`${this.file} is in place, but fsync of its directory failed, so it may not survive a power loss (${(e as Error).message})`);
    }
    return this.pos;
  }

  /** Drop the save: close and remove the temporary file (errors ignored). */
  abort(): void {
    if (this.fd !== null) {
      try { this.io.closeSync(this.fd); } catch { /* already failing */ }
      this.fd = null;
    }
    try { this.io.unlinkSync(this.tmp); } catch { /* absent */ }
  }

  private openFd(): number {
    if (this.fd === null) throw new Error(`${this.tmp} is closed`);
    return this.fd;
  }

  private guard(what: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.abort();
      throw new Error(`${what} ${this.tmp}: ${(e as Error).message} (the previous file is kept)`);
    }
  }
}

/** How a cache directory can be used: written, only read (a pre-warmed cache on read-only
 * storage), or not at all (why). */
export type DirAccess =
  | { readonly kind: 'writable' }
  | { readonly kind: 'read-only'; readonly why: string }
  | { readonly kind: 'unusable'; readonly why: string };

/** Errors of a write that say the directory is read-only (for this process). */
const READ_ONLY = new Set(['EROFS', 'EACCES', 'EPERM']);

/** Create `dir` and its missing parents (0700) one level at a time (node's recursive mkdir
 * can loop forever under /proc), then prove it writable with a probe file written, fsynced
 * and removed. An existing directory refusing the probe as read-only (EROFS, EACCES, EPERM)
 * can still be read. */
export function dirAccess(dir: string, io: FileIo = NODE_IO): DirAccess {
  const abs = resolve(dir);
  const missing: string[] = [];
  for (let p = abs; ; p = dirname(p)) {
    let isDir: boolean;
    try {
      isDir = io.statSync(p).isDirectory();
    } catch (e) {
      if ((errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') && dirname(p) !== p) {
        missing.unshift(p);
        continue;
      }
      return { kind: 'unusable', why: `cannot inspect ${p} (${(e as Error).message})` };
    }
    if (!isDir) return { kind: 'unusable', why: `${p} is not a directory` };
    break;
  }
  for (const p of missing) {
    try {
      io.mkdirSync(p, DIR_MODE);
    } catch (e) {
      if (errCode(e) !== 'EEXIST') return { kind: 'unusable', why: `cannot create ${p} (${(e as Error).message})` };
    }
  }
  const probe = join(abs, `.deltaserve-probe-${process.pid}`);
  let fd: number | null = null;
  try {
    fd = io.openSync(probe, 'w', FILE_MODE);
    writeFully(io, fd, Buffer.from('deltaserve\n'), 0, probe);
    io.fsyncSync(fd);
  } catch (e) {
    if (!READ_ONLY.has(errCode(e) ?? '')) return { kind: 'unusable', why: `cannot write files in it (${(e as Error).message})` };
    try {
      io.readdirSync(abs);
    } catch (r) {
      return { kind: 'unusable', why: `cannot write files in it (${(e as Error).message}) nor read it (${(r as Error).message})` };
    }
    return { kind: 'read-only', why: (e as Error).message };
  } finally {
    if (fd !== null) try { io.closeSync(fd); } catch { /* reported above */ }
    try { io.unlinkSync(probe); } catch { /* never created */ }
  }
  return { kind: 'writable' };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return errCode(e) === 'EPERM';
  }
}

/** Remove temporary files of `file` left by saves that never finished (a process killed
 * mid-save): ours by pid, or of processes that no longer run. Returns the names removed. */
export function removeStaleTemps(file: string, io: FileIo = NODE_IO): string[] {
  const prefix = `${basename(file)}.tmp-`;
  const removed: string[] = [];
  for (const name of io.readdirSync(dirname(file))) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length));
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) continue; // another server's save in progress
    try {
      io.unlinkSync(join(dirname(file), name));
      removed.push(name);
    } catch { /* raced with its owner */ }
  }
  return removed;
}
