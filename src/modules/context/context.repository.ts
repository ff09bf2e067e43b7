// Queries of the context module. Every query is scoped by the full session key, account first.
//
// The reads answer events as JSON text written by PostgreSQL in the Event schema's shape
// (event.model.ts, toEventView): the context read sends that text on without parsing it. Raw SQL
// with a precompiled text, for the reasons given in sessions/session-json.repository.ts. Events are
// read by a backward range scan of the primary key events_pkey (account, space, user, session,
// seq), which reads `limit` rows however long the history is.
import { CompiledQuery, type Transaction } from 'kysely';
import type { Executor } from '../../db/connect.js';
import { preparedStatement } from '../../db/prepared-statements.js';
import type { DB } from '../../db/schema.js';
import { EVENTS_OF_SESSION_KEY, NOW_MS } from '../../db/sql-fragments.js';
import { eventJson } from '../../db/event-json-sql.js';
import { liveSessionQuery, sessionKeyParameters } from '../../db/session-json-sql.js';
import type { SessionJsonRow } from '../sessions/index.js';
import type { SessionKey } from '../../db/keys.js';

/** An event of the newest, as the API shows it (its content as text once: used twice). */
const EVENT_JSON = eventJson({ event: 'e', contentText: 'e.content_text' });

/**
 * What the window selection needs of an event's parts besides its size: each function call and
 * response with its id and name, in part order, as WindowPart[] JSON; NULL for the many events
 * that have none (the strpos spares them the subquery; a false hit only costs it). The arguments
 * and results, often the bulk of such an event, stay in PostgreSQL.
 */
const WINDOW_PARTS = `CASE WHEN strpos(e.content_text, '"function') > 0 THEN (
  SELECT json_agg(json_strip_nulls(json_build_object(
    'functionCall', CASE WHEN p.part ? 'functionCall' THEN json_build_object('id', p.part->'functionCall'->'id', 'name', p.part->'functionCall'->'name') END,
    'functionResponse', CASE WHEN p.part ? 'functionResponse' THEN json_build_object('id', p.part->'functionResponse'->'id', 'name', p.part->'functionResponse'->'name') END
  )) ORDER BY p.ord)::text
  FROM jsonb_array_elements(e.content->'parts') WITH ORDINALITY AS p(part, ord)
  WHERE p.part ? 'functionCall' OR p.part ? 'functionResponse'
) END`;

/*
 * Events travel as ONE text value: records separated by U+001E, each `seq U+001F parts U+001F json`.
 * One value, not one row per event, keeps the read a single-row statement that plans as cheaply as
 * a join can; and the separators cannot occur inside JSON text as PostgreSQL writes it (it escapes
 * every control character in strings, and there is no other place for one), so splitting is exact.
 */
const RECORD = '\u001e';
const FIELD = '\u001f';
/** The events `newest`, newest first, as the records described above (NULL for none). */
const eventRecords = (newest: string) => `(
  SELECT string_agg(concat(e.seq, chr(31), ${WINDOW_PARTS}, chr(31), ${EVENT_JSON}), chr(30) ORDER BY e.seq DESC)
  FROM (${newest}) AS e
)`;

/** The columns of events a record is built from, with the content as text once (used twice). */
const EVENT_COLUMNS = `events.seq, events.event_id, events.invocation_id, events.author, events.content, events.content::text AS content_text,
    events.actions, events.metadata, events.extensions, events.error_code, events.error_message, events.event_time, events.create_time`;

/** An event of a context read: its seq, its JSON as the API shows it, and its calls and responses (WindowPart[] JSON). */
export interface EventJsonRow {
  seq: number;
  json: string;
  window_parts: string | null;
}

function parseEventRecords(records: string | null): EventJsonRow[] {
  if (!records) return [];
  return records.split(RECORD).map((record) => {
    const first = record.indexOf(FIELD);
    const second = record.indexOf(FIELD, first + 1);
    const parts = record.slice(first + 1, second);
    return { seq: Number(record.slice(0, first)), window_parts: parts === '' ? null : parts, json: record.slice(second + 1) };
  });
}

/**
 * One statement: the live session with its shared state as the API's JSON, and its newest `limit`
 * ($5) events from windowStartSeq to eventCount as JSON text. A single statement reads one
 * snapshot, so this needs no transaction.
 */
const SESSION_WITH_NEWEST_EVENTS = preparedStatement('read_context', liveSessionQuery(
  `${eventRecords(`SELECT ${EVENT_COLUMNS} FROM events
    WHERE ${EVENTS_OF_SESSION_KEY}
      AND events.seq >= s.window_start_seq AND events.seq <= s.event_count
    ORDER BY events.seq DESC
    LIMIT $5`)} AS events`,
  ),
);

export interface SessionWithNewestEvents {
  session: SessionJsonRow;
  /** Newest first. */
  newest: EventJsonRow[];
}

export async function findSessionWithNewestEvents(
  db: Executor,
  key: SessionKey,
  limit: number,
): Promise<SessionWithNewestEvents | undefined> {
  const { rows } = await db.executeQuery<SessionJsonRow & { events: string | null }>(
    CompiledQuery.raw(SESSION_WITH_NEWEST_EVENTS, [...sessionKeyParameters(key), limit]),
  );
  const row = rows[0];
  if (!row) return undefined;
  const { events, ...session } = row;
  return { session, newest: parseEventRecords(events) };
}

// Planned once for any session and any range (EVENTS_OF_SESSION_KEY; before, every short session's
// page was planned again, 0 of 600 runs took the plan for any session). The bounds of seq and the
// limit are read as subqueries as well: a narrow range or a small limit planned for its values looked
// cheaper too, and either one left a parameter kept the page planned again.
const NEWEST_EVENTS = preparedStatement('read_context_page', `SELECT ${eventRecords(`SELECT ${EVENT_COLUMNS} FROM events
    WHERE ${EVENTS_OF_SESSION_KEY}
      AND events.seq >= (SELECT $5::bigint) AND events.seq < (SELECT $6::bigint)
    ORDER BY events.seq DESC
    LIMIT (SELECT $7::integer)`)} AS events`);

/** The newest events with seq in [fromSeq, beforeSeq) as JSON text, newest first. */
export async function listNewestEvents(
  trx: Transaction<DB>,
  key: SessionKey,
  range: { fromSeq: number; beforeSeq: number; limit: number },
): Promise<EventJsonRow[]> {
  const { rows } = await trx.executeQuery<{ events: string | null }>(
    CompiledQuery.raw(NEWEST_EVENTS, [...sessionKeyParameters(key), range.fromSeq, range.beforeSeq, range.limit]),
  );
  return parseEventRecords(rows[0]?.events ?? null);
}

/** Sets the window start and/or memo (serialized JSON, null clears), bumps revision and update time. */
export async function updateContextFields(trx: Transaction<DB>, key: SessionKey, changes: { windowStartSeq?: number; memo?: string | null }): Promise<void> {
  await trx
    .updateTable('sessions')
    .set((eb) => ({
      ...(changes.windowStartSeq !== undefined ? { window_start_seq: changes.windowStartSeq } : {}),
      ...(changes.memo !== undefined ? { memo: changes.memo } : {}),
      revision: eb('revision', '+', 1),
      update_time: NOW_MS,
    }))
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .where('session_id', '=', key.sessionId)
    .executeTakeFirstOrThrow();
}
