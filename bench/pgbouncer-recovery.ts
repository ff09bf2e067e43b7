// How long appends stay refused behind PgBouncer once PostgreSQL is back (issue 19,
// docs/scale-out.md §2): a private cluster behind a private PgBouncer in transaction mode, an agent
// appending every 50 ms through the service, PostgreSQL stopped as in a crash (`-m immediate`) for
// 3 s and started again. Printed: the time from "PostgreSQL accepts connections again" to the first
// append answered 201, for PgBouncer's default server_login_retry (15 s) and for 1 s, each
// RECOVERY_ROUNDS times (default 2). Every answer is 201 or 503 with Retry-After, never anything
// else; checked.
//
//   npm run bench:recovery
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { buildApp } from '../src/app.js';
import { DEFAULT_LIMITS } from '../src/config.js';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/accounts.service.js';
import { createPrivateCluster } from '../test/support/private-cluster.js';
import { startPrivatePgBouncer } from '../test/support/private-pgbouncer.js';
import { TEST_PAGE_TOKEN_KEY } from '../test/support/test-app.js';

const ROUNDS = Number(process.env.RECOVERY_ROUNDS ?? 2);
const OUTAGE_MS = 3_000;
const APPEND_EVERY_MS = 50;
const STATEMENT_TIMEOUT_MS = 2_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function measure(serverLoginRetry: number | undefined): Promise<number[]> {
  const cluster = await createPrivateCluster();
  await cluster.start();
  const settings: Record<string, number> = serverLoginRetry === undefined ? {} : { server_login_retry: serverLoginRetry };
  const bouncer = await startPrivatePgBouncer({ upstream: cluster.url(), poolSize: 4, settings, connectQuery: `SET statement_timeout = ${STATEMENT_TIMEOUT_MS}; SET idle_in_transaction_session_timeout = ${STATEMENT_TIMEOUT_MS}` });
  const handle = await openDatabase({ kind: 'postgres', url: bouncer.url('postgres'), directUrl: cluster.url(), poolMax: 4, statementTimeoutMs: STATEMENT_TIMEOUT_MS, connectTimeoutMs: 1_000 });
  const recoveries: number[] = [];
  try {
    await handle.onDirectConnection(migrateToLatest);
    const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0 } });
    const account = await createAccount(handle.db, `recovery-${randomUUID()}`);
    const url = `/v1/spaces/${account.defaultSpaceId}/users/u/sessions`;
    const headers = { authorization: `Bearer ${account.rootCredential.token}` };
    await app.inject({ method: 'POST', url, headers, payload: { sessionId: 's' } });
    let stop = false;
    const answers: { at: number; status: number }[] = [];
    const agent = (async () => {
      while (!stop) {
        const res = await app.inject({ method: 'POST', url: `${url}/s/events`, headers, payload: { author: 'user' } });
        if (res.statusCode !== 201 && !(res.statusCode === 503 && res.headers['retry-after'])) throw new Error(`unexpected answer ${res.statusCode}: ${res.body}`);
        answers.push({ at: performance.now(), status: res.statusCode });
        await sleep(APPEND_EVERY_MS);
      }
    })();
    for (let round = 0; round < ROUNDS; round++) {
      await sleep(1_000);
      await cluster.stopImmediate();
      await sleep(OUTAGE_MS);
      await cluster.start();
      const up = performance.now();
      while (!answers.some((answer) => answer.at > up && answer.status === 201)) await sleep(20);
      recoveries.push(answers.find((answer) => answer.at > up && answer.status === 201)!.at - up);
    }
    stop = true;
    await agent;
    await app.close();
  } finally {
    await handle.close();
    await bouncer.remove();
    await cluster.remove();
  }
  return recoveries;
}

for (const retry of [undefined, 1]) {
  const recoveries = await measure(retry);
  const label = retry === undefined ? 'server_login_retry default (15 s)' : `server_login_retry = ${retry}`;
  console.log(`${label}: first append stored ${recoveries.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(', ')} after PostgreSQL accepted connections again`);
}
