// Progress of a model download over all its files. On a terminal: one line redrawn at most
// 10 times a second (bar, percent, bytes, rate, time left). Into a pipe or a log: a plain
// line at every further 10% reached, at most one per 2 s, and a last line when done, so a
// log shows that it moves without a line per chunk.
import { fmtBytes } from '../util/bytes.js';

export interface ProgressSink {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

export interface DownloadProgress {
  /** Bytes already there (complete blobs, resumed partial files): counted, not timed. */
  have(n: number): void;
  /** Bytes received now. */
  add(n: number): void;
  /** The last draw (or line), once. */
  done(): void;
}

const REDRAW_MS = 100;
const LINE_MIN_MS = 2000;
const LINE_STEP = 0.1;
const BAR = 24;

function duration(s: number): string {
  if (!Number.isFinite(s)) return '?';
  if (s < 60) return `${Math.ceil(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.ceil(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Progress toward `total` bytes of `label`; `now` is a millisecond clock (tests inject one). */
export function downloadProgress(label: string, total: number, sink: ProgressSink,
  now: () => number = () => performance.now()): DownloadProgress {
  const start = now();
  let have = 0;
  let got = 0;
  let lastAt = -Infinity;
  let lastStep = -1;
  let finished = false;
  const tty = sink.isTTY === true;

  const status = (t: number): string => {
    const frac = total > 0 ? Math.min(1, (have + got) / total) : 1;
    const secs = Math.max(1e-3, (t - start) / 1000);
    const rate = got / secs;
    const left = rate > 0 ? (total - have - got) / rate : Infinity;
    const bar = tty ? ` [${'#'.repeat(Math.round(frac * BAR)).padEnd(BAR, '.')}]` : '';
    const eta = finished ? ` in ${duration(secs)}` : rate > 0 ? `, ${duration(left)} left` : '';
    const speed = got > 0 ? `, ${fmtBytes(rate)}/s` : '';
    return `${label}${bar} ${(frac * 100).toFixed(0).padStart(3)}% ${fmtBytes(have + got)} / ${fmtBytes(total)}${speed}${eta}`;
  };
  const draw = (t: number): void => {
    lastAt = t;
    if (tty) sink.write(`\r${status(t)}\x1b[K`);
    else sink.write(`${status(t)}\n`);
  };
  const maybeDraw = (): void => {
    const t = now();
    if (tty) {
      if (t - lastAt >= REDRAW_MS) draw(t);
      return;
    }
    const step = total > 0 ? Math.floor((have + got) / total / LINE_STEP) : 0;
    if (step > lastStep && t - lastAt >= LINE_MIN_MS) {
      lastStep = step;
      draw(t);
    }
  };
  return {
    have(n) {
      have += n;
      if (!finished) maybeDraw();
    },
    add(n) {
      got += n;
      if (!finished) maybeDraw();
    },
    done() {
      if (finished) return;
      finished = true;
      draw(now());
      if (tty) sink.write('\n');
    },
  };
}
