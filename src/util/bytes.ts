// Byte counts as people read them (decimal units: kB, MB, GB).

/** "1.23 GB", "4.5 MB", "0.8 kB". */
export function fmtBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e3).toFixed(1)} kB`;
}
