// How times and sizes read.

const units: [Intl.RelativeTimeFormatUnit, number][] = [
  ["day", 86400],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];
const rtf = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

/** "3 minutes ago", "in 2 hours". */
export function relative(iso: string, now = Date.now()): string {
  const t = Date.parse(iso);
  if (isNaN(t)) return "";
  if (new Date(t).getUTCFullYear() >= 9999) return "never";
  const s = Math.round((t - now) / 1000);
  for (const [unit, n] of units) {
    if (Math.abs(s) >= n || unit === "second") return rtf.format(Math.trunc(s / n), unit);
  }
  return "";
}

export function absolute(iso: string): string {
  const t = new Date(iso);
  return isNaN(t.getTime()) ? "" : t.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

export function bytes(n: number): string {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)} ${u[i]}`;
}
