// A one-line progress bar on stderr (e.g. for weight loading). Draws only when stderr is a
// TTY — logs and pipes see nothing — and redraws at most 10 times a second.

export interface ProgressBar {
  /** Record n more units (bytes) done. */
  tick(n: number): void;
  /** Draw the final state and end the line. Idempotent. */
  done(): void;
}

const MIN_REDRAW_MS = 100;
const BAR_WIDTH = 30;
const MB = 1024 * 1024;

const NOOP: ProgressBar = { tick() {}, done() {} };

export function progressBar(label: string, total: number): ProgressBar {
  const stream = process.stderr;
  if (!stream.isTTY) return NOOP;
  const start = Date.now();
  let count = 0;
  let lastDraw = 0;
  let finished = false;

  const draw = (now: number): void => {
    lastDraw = now;
    const frac = total > 0 ? Math.min(1, count / total) : 1;
    const filled = Math.round(frac * BAR_WIDTH);
    const secs = Math.max(1e-3, (now - start) / 1000);
    const bar = '#'.repeat(filled) + '.'.repeat(BAR_WIDTH - filled);
    const pct = (frac * 100).toFixed(0).padStart(3);
    const rate = (count / MB / secs).toFixed(1);
    stream.write(`\r${label} [${bar}] ${pct}% ${(count / MB).toFixed(1)}/${(total / MB).toFixed(1)} MB ${rate} MB/s\x1b[K`);
  };

  return {
    tick(n: number): void {
      if (finished) return;
      count += n;
      const now = Date.now();
      if (now - lastDraw >= MIN_REDRAW_MS) draw(now);
    },
    done(): void {
      if (finished) return;
      finished = true;
      draw(Date.now());
      stream.write('\n');
    },
  };
}
