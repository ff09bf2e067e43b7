// Shared by the benchmarks: a throwaway database on the benchmark server, and latency statistics.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';

export const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

export async function admin(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** Creates a fresh database named `ass_bench_<random>` and returns its URL and a drop function. */
export async function createBenchDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `ass_bench_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE DATABASE "${name}"`);
  return { name, url: withDatabase(ADMIN_URL, name), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export interface Latency {
  p50: number;
  p99: number;
  mean: number;
}

/** Resident set size of this process, in MiB, for the "RSS after each run" lines. */
export function rssMiB(): string {
  return (process.memoryUsage().rss / 1024 / 1024).toFixed(1);
}

/**
 * Times `contestants` sequentially, `warmup` untimed rounds then `runs` timed ones; each round runs
 * every contestant once, in turn, so that all of them meet the same moments of a noisy machine.
 */
export async function timeInterleaved(runs: number, contestants: (() => Promise<void>)[], warmup = 50): Promise<Latency[]> {
  for (let i = 0; i < warmup; i++) for (const once of contestants) await once();
  const samples: number[][] = contestants.map(() => []);
  for (let i = 0; i < runs; i++) {
    for (const [k, once] of contestants.entries()) {
      const start = performance.now();
      await once();
      samples[k]!.push(performance.now() - start);
    }
  }
  return samples.map((values) => {
    values.sort((a, b) => a - b);
    return { p50: percentile(values, 50), p99: percentile(values, 99), mean: values.reduce((a, b) => a + b, 0) / values.length };
  });
}
