// An event as the API shows it, as SQL text that PostgreSQL turns into JSON: shared by the context
// read (context.repository.ts), which sends the newest events on unparsed, and the event lists
// (events.repository.ts). Text, not a query: the repositories put it in theirs.
import { isoTimestamp } from './session-json-sql.js';

/** Where an events row is found in a query, and its content as text. */
export interface EventJsonColumns {
  event: string;
  contentText: string;
}

/**
 * toEventView (src/modules/events/event.model.ts) in SQL: the optional fields are left out when null
 * (concat skips a NULL argument, and `',"x":' || NULL` is NULL). Top-level fields are written
 * compactly, the jsonb columns as jsonb writes them (`{"a": 1}`), which compactJsonLength measures as
 * JSON.stringify would.
 */
export const eventJson = ({ event: e, contentText }: EventJsonColumns): string => `concat(
  '{"seq":', ${e}.seq,
  ',"eventId":', to_json(${e}.event_id)::text,
  ',"invocationId":'::text || to_json(${e}.invocation_id)::text,
  ',"author":', to_json(${e}.author)::text,
  ',"content":'::text || ${contentText},
  ',"actions":'::text || ${e}.actions::text,
  ',"metadata":'::text || ${e}.metadata::text,
  ',"extensions":'::text || ${e}.extensions::text,
  ',"errorCode":'::text || to_json(${e}.error_code)::text,
  ',"errorMessage":'::text || to_json(${e}.error_message)::text,
  ',"timestamp":"', ${isoTimestamp(`${e}.event_time`)}, '","createTime":"', ${isoTimestamp(`${e}.create_time`)}, '"}'
)`;
