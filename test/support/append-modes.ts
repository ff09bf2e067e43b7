// The ways production runs appends, for the suites that race them (concurrency, replay, If-Match,
// scoped state, faults): each runs once per mode with describe.each(APPEND_MODES), not as copies.
//
// On PostgreSQL: group commit with two calls at once, the default of a server with a DATABASE_URL
// (src/config.ts: APPEND_BATCH_CONCURRENCY = min(2, DB_POOL_MAX)), where batches race each other's
// row locks; and one append per call (APPEND_BATCH_MAX=1), where every append races every other
// on the pool's connections, as with batching turned off. On PGlite there is one connection, so
// appends reach the database one after another whatever the settings: the suites there check the
// answers and the stored result of an interleaved workload, not a race; the mode's name says so.
import { inject } from 'vitest';
import type { Limits } from '../../src/config.js';

export interface AppendMode {
  name: string;
  limits: Pick<Limits, 'appendBatchMax' | 'appendBatchConcurrency'>;
}

export const GROUP_COMMIT: AppendMode = { name: 'group commit, 2 calls at once', limits: { appendBatchMax: 32, appendBatchConcurrency: 2 } };
export const ONE_APPEND_PER_CALL: AppendMode = { name: 'one append per call (APPEND_BATCH_MAX=1)', limits: { appendBatchMax: 1, appendBatchConcurrency: 2 } };
const PGLITE_SEQUENTIAL: AppendMode = { name: 'PGlite: one connection, appends in turn (no race)', limits: { appendBatchMax: 32, appendBatchConcurrency: 1 } };

// On the Citus cluster (the citus project), the service's default there: group commit, batches
// formed per account (src/db/citus.ts); the cluster run is CI's longest, so the suites run once.
const backend = inject('testBackend');
const onCitus = backend.kind === 'postgres' && backend.source === 'a private Citus cluster';
export const APPEND_MODES: AppendMode[] = backend.kind !== 'postgres' ? [PGLITE_SEQUENTIAL] : onCitus ? [GROUP_COMMIT] : [GROUP_COMMIT, ONE_APPEND_PER_CALL];
