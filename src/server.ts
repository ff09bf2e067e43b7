// Entry point: configuration, database, migrations, then serve until a signal asks to stop.
//
// The embedded mode's first start prints the new root credential before it listens, so a listen
// that fails (a busy port) cannot lose it: the credential stays above the one-line error, it is
// already valid, and the next start on a free port serves it.
import closeWithGrace from 'close-with-grace';
import { buildApp } from './app.js';
import { type Config, loadConfig } from './config.js';
import { openDatabase } from './db/connect.js';
import { type EmbeddedVacuum, startEmbeddedVacuum } from './db/embedded-vacuum.js';
import { startStatisticsKeeper } from './db/planner-statistics.js';
import { migrateToLatest } from './db/migrate.js';
import { databaseTargets, type DatabaseTarget, describeDatabaseFailure } from './db/unreachable-database.js';
import { type DataDirLock, lockDataDir } from './lib/data-dir-lock.js';
import { createLogger } from './lib/logger.js';
import { nodeVersionWarning, requiredNodeRange } from './lib/node-version.js';
import { connectRateLimitRedis, rateLimitRedisReady } from './http/rate-limit.js';
import { drainConnectionsOnClose } from './http/shutdown-drain.js';
import { ensureEmbeddedAccount, startCredentialCache } from './modules/accounts/index.js';
import { type ExpirySweeper, startExpirySweeper } from './modules/sessions/index.js';
import { resolvePageTokenKey } from './page-token-key.js';
import { resolveCredentialMasterKey } from './credential-master-key.js';
import { reportStartupFailure, StartupFailure } from './startup-failure.js';

// How long the start waits for REDIS_URL's server before it serves without it.
const REDIS_START_WAIT_MS = 2_000;

// Read by the failure report at the end, which prints a stack only at debug level.
let loadedConfig: Config | undefined;

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  loadedConfig = config;
  const logger = createLogger({ level: config.logLevel, format: config.logFormat, stdoutIsTerminal: process.stdout.isTTY === true });
  const nodeWarning = nodeVersionWarning(process.version, requiredNodeRange());
  if (nodeWarning) logger.warn({ nodeVersion: process.version }, nodeWarning);

  // Before the database is opened: a second process on the folder is refused having done nothing.
  const lock: DataDirLock | undefined =
    config.database.kind === 'pglite'
      ? await lockDataDir(config.database.dataDir, 'server', 'stop it first, or set DATA_DIR to another folder.')
      : undefined;
  const database = await openDatabase(config.database);
  const targets = databaseTargets(config.database);
  const applied = await explainingDatabaseFailure(targets?.direct, () => database.onDirectConnection(migrateToLatest));
  logger.info({ backend: database.kind, applied }, 'database ready');
  // After the database: in embedded mode the data directory exists now.
  const pageTokenKey = await resolvePageTokenKey(config, logger);
  const credentialMasterKey = await resolveCredentialMasterKey(config, logger);

  // The embedded mode (and any setup that pins ROOT_API_KEY) gets a ready `default` account.
  if (database.kind === 'pglite' || config.rootApiKey) {
    const created = await explainingDatabaseFailure(targets?.pooled, () =>
      ensureEmbeddedAccount(database.db, { pinnedToken: config.rootApiKey, masterKey: credentialMasterKey }),
    );
    if (created && !config.rootApiKey) printRootCredentialOnce(created.rootCredential.token, created.defaultSpaceId);
  }

  // Each instance sweeps; SKIP LOCKED keeps several sweepers off each other's rows.
  const sweeper: ExpirySweeper | undefined =
    config.sweeper.intervalMs > 0 ? startExpirySweeper(database.db, { ...config.sweeper, logger }) : undefined;

  // PGlite has no autovacuum of its own: the embedded server does its work.
  const embeddedVacuum: EmbeddedVacuum | undefined =
    database.kind === 'pglite' && config.embeddedVacuumIntervalMs > 0 ? startEmbeddedVacuum(database.db, { intervalMs: config.embeddedVacuumIntervalMs, logger }) : undefined;
  // A database without autovacuum, or before its first run, plans session lookups without statistics;
  // on PGlite this covers the minute before the embedded vacuum's first run.
  const statisticsKeeper = config.analyzeIntervalMs > 0 ? startStatisticsKeeper(database.db, { intervalMs: config.analyzeIntervalMs, logger }) : undefined;

  // Listens for credential changes on its own connection; closed with the app.
  const credentialCache = config.credentialCacheSize > 0 ? startCredentialCache(database.listen, { maxEntries: config.credentialCacheSize, logger }) : undefined;
  const rateLimitRedis = config.redis ? connectRateLimitRedis(config.redis.url, config.redis.keyPrefix, logger) : undefined;
  if (rateLimitRedis && !(await rateLimitRedisReady(rateLimitRedis, REDIS_START_WAIT_MS))) {
    logger.warn({}, 'rate limit: Redis did not answer at start; serving uncounted until it does');
  }
  const app = await buildApp({
    db: database.db,
    pool: database.poolStats,
    metricsToken: config.metricsToken,
    limits: config.limits,
    credentialMasterKey,
    tencentApiPath: config.tencentApiPath,
    pageTokenKey,
    logger,
    credentialCache,
    rateLimitRedis,
    eventStreamPollMs: config.eventStreamPollMs,
  });
  // Node's close() would destroy idle keep-alive connections at once, cutting off a request already
  // sent on one: they get a grace period instead.
  drainConnectionsOnClose(app.server);
  closeWithGrace({ delay: 10_000, logger }, async ({ signal, err }) => {
    if (err) logger.error({ err }, 'shutting down after an error');
    else logger.info({ signal }, 'shutting down');
    // Stops accepting and lets in-flight requests finish; a request that arrives on an open keep-alive
    // connection is answered 503 ShuttingDown, and each connection closes once it has been idle for
    // a moment (http/shutdown-drain.ts), so no client waits for its keep-alive timeout.
    await app.close(); // closes the credential cache's listener too
    await sweeper?.stop(); // waits for a sweep in flight, which needs the database
    await embeddedVacuum?.stop(); // likewise
    await statisticsKeeper?.stop();
    // How many connections the pool ends here (each with a Terminate message, not a cut socket).
    const closedConnections = database.pool.totalCount;
    await database.close();
    await lock?.release();
    logger.info({ closedConnections }, 'shut down: requests finished, database pool closed');
  });
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    const reason = listenFailure(error, config.port, config.host);
    if (!reason) throw error;
    // Closes what started (the database first of all: an embedded PGlite keeps its files consistent).
    await app.close();
    await sweeper?.stop();
    await embeddedVacuum?.stop();
    await statisticsKeeper?.stop();
    await database.close();
    await lock?.release();
    throw new StartupFailure(reason);
  }
}

/** Runs a start-up step; a failure to reach `target` becomes a one-line StartupFailure. */
async function explainingDatabaseFailure<T>(target: DatabaseTarget | undefined, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    const reason = target && describeDatabaseFailure(error, target);
    throw reason ? new StartupFailure(reason, { cause: error }) : error;
  }
}

function listenFailure(error: unknown, port: number, host: string): string | undefined {
  switch ((error as NodeJS.ErrnoException | undefined)?.code) {
    case 'EADDRINUSE':
      return `Port ${port} is in use: set PORT to another port.`;
    case 'EACCES':
      return `Port ${port} needs privileges this process lacks: set PORT to another port (1024 or above).`;
    case 'EADDRNOTAVAIL':
      return `HOST ${host} is not an address of this machine: set HOST to one (0.0.0.0 for all).`;
    default:
      return undefined;
  }
}

// Written to the terminal, never to the log stream: the secret must not reach log storage.
function printRootCredentialOnce(token: string, defaultSpaceId: string): void {
  process.stdout.write(
    [
      '',
      'Created the "default" account. Its root credential is shown this once:',
      `  export TOKEN=${token}`,
      `Default space: ${defaultSpaceId}`,
      '',
    ].join('\n') + '\n',
  );
}

main().catch((error: unknown) => {
  reportStartupFailure(error, loadedConfig, 'Failed to start');
  process.exit(1);
});
