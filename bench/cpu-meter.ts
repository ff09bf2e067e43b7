// CPU time per operation, read from /proc (Linux): of the server process, of this process (the
// load generator or the in-process client) and of the PostgreSQL backends of the bench database.
import { existsSync, readFileSync } from 'node:fs';
import type pg from 'pg';

const CLOCK_TICKS = 100; // USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s

/** CPU seconds (user + system) a process has used so far; 0 once it has gone. */
export function cpuSecondsOf(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

export interface CpuPerOperation {
  server: number;
  bench: number;
  postgres: number;
}

/**
 * Starts counting the CPU used by the server, by this process and by the PostgreSQL backends of
 * `database`; the function it answers stops and gives milliseconds per operation. Backends that
 * connect and leave within the window (pgbench's) are not seen: their column is not meaningful.
 */
export async function cpuMeter(pool: pg.Pool, database: string, serverPid: number): Promise<(count: number) => Promise<CpuPerOperation>> {
  const backends = async () => (await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database])).rows.map((row) => row.pid);
  const sample = (pids: number[]) => {
    const self = process.cpuUsage();
    return { server: cpuSecondsOf(serverPid), bench: (self.user + self.system) / 1e6, postgres: new Map(pids.map((pid) => [pid, cpuSecondsOf(pid)])) };
  };
  const before = sample(await backends());
  return async (count: number) => {
    const pids = [...new Set([...before.postgres.keys(), ...(await backends())])];
    const after = sample(pids);
    let postgres = 0;
    // A backend that ended during the run (an idle pool connection closing) is left out.
    for (const pid of pids) if (existsSync(`/proc/${pid}`)) postgres += (after.postgres.get(pid) ?? 0) - (before.postgres.get(pid) ?? 0);
    const perOperation = (seconds: number) => (seconds * 1000) / count;
    return { server: perOperation(after.server - before.server), bench: perOperation(after.bench - before.bench), postgres: perOperation(postgres) };
  };
}
