// The least an HTTP append service can cost: the hand-written SQL client of issue 24 behind HTTP.
// A bare Fastify server (no authentication, no validation beyond JSON parsing, no limits, no
// logging, no metrics) whose one route runs the minimal append as one statement through `pg` on
// the minimal schema (minimal-transaction.ts): the session's counter and state updated, the event
// inserted, one round trip and one commit per request. bench:append runs it as a child process
// beside the real server and loads it the same way, so its server CPU per request is the floor
// for the service's, on the same machine in the same run.
//
//   DATABASE_URL=… PORT=… POOL_MAX=… tsx bench/hand-written-server.ts
import Fastify from 'fastify';
import pg from 'pg';
import { MINIMAL_SCHEMA } from './minimal-transaction.js';

const APPEND = `
  WITH s AS (
    UPDATE ${MINIMAL_SCHEMA}.sessions
    SET state = state || $4::jsonb, revision = revision + 1, event_count = event_count + 1, update_time = now()
    WHERE space_id = $1 AND user_id = $2 AND session_id = $3
    RETURNING space_id, user_id, session_id, event_count)
  INSERT INTO ${MINIMAL_SCHEMA}.events (space_id, user_id, session_id, seq, event_id, author, content, state_delta)
  SELECT space_id, user_id, session_id, event_count, $5, $6, $7::jsonb, $4::jsonb FROM s
  RETURNING seq`;

/** The minimal schema's one space: the route takes the user and session from the path, as the service does. */
const SPACE = 'space-1';

interface AppendBody {
  eventId: string;
  author: string;
  content?: unknown;
  actions?: { stateDelta?: Record<string, unknown> };
}

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL_MAX ?? 10) });
const app = Fastify();

app.post<{ Params: { userId: string; sessionId: string }; Body: AppendBody }>(
  '/v1/spaces/:spaceId/users/:userId/sessions/:sessionId/events',
  async (request, reply) => {
    const { userId, sessionId } = request.params;
    const { eventId, author, content, actions } = request.body;
    const delta = JSON.stringify(actions?.stateDelta ?? {});
    const result = await pool.query({ name: 'append', text: APPEND, values: [SPACE, userId, sessionId, delta, eventId, author, JSON.stringify(content ?? null)] });
    if (result.rowCount === 0) return reply.status(404).send({ error: 'no such session' });
    return reply.status(201).send({ seq: Number(result.rows[0].seq), eventId });
  },
);
app.get('/readyz', async () => ({ status: 'ok' }));

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
process.on('SIGTERM', () => void app.close().then(() => pool.end()).then(() => process.exit(0)));
