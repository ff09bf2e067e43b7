// A private PgBouncer for one test file (or a benchmark): its own configuration, auth file, port,
// socket directory, log and pid file in a fresh temporary directory, removed afterwards. The
// machine's own PgBouncer (if one is configured) is never touched.
//
// It runs in transaction mode, the mode that lets N instances share a few server connections, with
// a random password for its one user (auth_file, SCRAM). Upstream is one PostgreSQL server; every
// database name is passed through. Server connections run `connect_query` once when they open: the
// service sends no session settings through a pooler, so the statement timeouts are set here.
//
// PgBouncer refuses to run as root; as root it is started with `-u postgres` and its directory is
// handed to that user.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, sleep } from './service-process.js';

export interface PrivatePgBouncer {
  readonly port: number;
  /** postgres://<user>:<password>@127.0.0.1:<port>/<database>, through the pooler. */
  url(database: string): string;
  /** SHOW <what> on the admin console (POOLS, SERVERS, STATS, VERSION …). */
  show(what: string): Promise<Record<string, unknown>[]>;
  log(): Promise<string>;
  /** Stops PgBouncer and deletes the directory. */
  remove(): Promise<void>;
}

export interface PgBouncerOptions {
  /** The PostgreSQL server behind it (a URL; only its host, port and user are used). */
  upstream: string;
  /** Server connections per database and user: what every instance's pool is multiplexed onto. */
  poolSize: number;
  /** Run once per new server connection, e.g. `SET statement_timeout = 10000`. */
  connectQuery?: string;
  /** max_prepared_statements (PgBouncer 1.21+ only); left out when undefined. */
  maxPreparedStatements?: number;
  /** More `[pgbouncer]` settings, e.g. { server_login_retry: 1 } (bench/pgbouncer-recovery.ts). */
  settings?: Record<string, string | number>;
}

/** Where the pgbouncer binary is, or undefined (the Debian package `pgbouncer` installs /usr/sbin/pgbouncer). */
export function findPgBouncer(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin', '/usr/bin'];
  return dirs.map((dir) => join(dir, 'pgbouncer')).find((file) => file.startsWith('/') && existsSync(file));
}

/** `PgBouncer 1.18.0` → [1, 18, 0]. */
export function pgBouncerVersion(binary: string): number[] {
  const text = execFileSync(binary, ['--version']).toString();
  const match = /PgBouncer (\d+)\.(\d+)\.(\d+)/.exec(text);
  if (!match) throw new Error(`unexpected pgbouncer --version output: ${text}`);
  return match.slice(1).map(Number);
}

export async function startPrivatePgBouncer(options: PgBouncerOptions): Promise<PrivatePgBouncer> {
  const binary = findPgBouncer();
  if (!binary) throw new Error('pgbouncer was not found: apt-get install -y pgbouncer');
  const upstream = new URL(options.upstream);
  const asRoot = process.getuid?.() === 0;
  const directory = await mkdtemp(join(tmpdir(), 'ass-pgbouncer-'));
  const port = await freePort();
  const user = 'service';
  const password = randomBytes(18).toString('base64url');
  const adminPassword = randomBytes(18).toString('base64url');
  const upstreamUser = decodeURIComponent(upstream.username || 'postgres');
  const upstreamPassword = decodeURIComponent(upstream.password);

  const connectQuery = options.connectQuery ? ` connect_query='${options.connectQuery.replaceAll("'", "''")}'` : '';
  const ini = [
    '[databases]',
    // Every database name the client asks for, on the upstream server, as the upstream user.
    `* = host=${upstream.hostname} port=${upstream.port || 5432} user=${upstreamUser}${upstreamPassword ? ` password=${upstreamPassword}` : ''}${connectQuery}`,
    '',
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    `unix_socket_dir = ${directory}`,
    `auth_type = scram-sha-256`,
    `auth_file = ${join(directory, 'userlist.txt')}`,
    `logfile = ${join(directory, 'pgbouncer.log')}`,
    `pidfile = ${join(directory, 'pgbouncer.pid')}`,
    'admin_users = admin',
    'pool_mode = transaction',
    `default_pool_size = ${options.poolSize}`,
    'min_pool_size = 0',
    'reserve_pool_size = 0',
    'max_client_conn = 200',
    // Without it PgBouncer refuses a client that sends one; the service sends none (see connect.ts).
    'ignore_startup_parameters =',
    ...(options.maxPreparedStatements !== undefined ? [`max_prepared_statements = ${options.maxPreparedStatements}`] : []),
    ...Object.entries(options.settings ?? {}).map(([name, value]) => `${name} = ${value}`),
    '',
  ].join('\n');
  await writeFile(join(directory, 'pgbouncer.ini'), ini, { mode: 0o600 });
  await writeFile(join(directory, 'userlist.txt'), `"${user}" "${password}"\n"admin" "${adminPassword}"\n`, { mode: 0o600 });
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    for (const file of ['', 'pgbouncer.ini', 'userlist.txt']) await chown(join(directory, file), uid, gid);
  }

  const child: ChildProcess = spawn(binary, [...(asRoot ? ['-u', 'postgres'] : []), join(directory, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const running = () => child.exitCode === null && child.signalCode === null;

  const adminUrl = `postgres://admin:${adminPassword}@127.0.0.1:${port}/pgbouncer`;
  const bouncer: PrivatePgBouncer = {
    port,
    url: (database) => `postgres://${user}:${password}@127.0.0.1:${port}/${database}`,
    async show(what) {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        return (await client.query(`SHOW ${what}`)).rows as Record<string, unknown>[];
      } finally {
        await client.end();
      }
    },
    log: () => readFile(join(directory, 'pgbouncer.log'), 'utf8').catch(() => output),
    async remove() {
      if (running()) {
        child.kill('SIGINT'); // "safe shutdown"; SIGKILL below if it lingers
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      process.removeListener('exit', killOnExit);
      await rm(directory, { recursive: true, force: true });
    },
  };

  // Ready once the admin console answers.
  for (let attempt = 0; ; attempt++) {
    if (!running()) {
      const log = await bouncer.log();
      await bouncer.remove();
      throw new Error(`pgbouncer exited at start:\n${output}\n${log}`);
    }
    try {
      await bouncer.show('VERSION');
      return bouncer;
    } catch (error) {
      if (attempt > 200) {
        await bouncer.remove();
        throw error;
      }
      await sleep(50);
    }
  }
}
