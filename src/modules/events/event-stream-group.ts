// The open event streams of one session (event-stream.service.ts): they share one read of the new
// events per wake-up. Each stream is at its own position (it may have opened with an older
// Last-Event-ID, or fallen behind): it reads alone until it has reached the shared position, then
// joins the streams the shared read feeds, and from then on takes, of each shared read, only the
// events after its own last one. So no stream skips or repeats an event.
import type { Database } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import { listEventJsons } from './events.repository.js';

/** The SSE frame of one event: its seq is the id a reconnecting client sends back as Last-Event-ID. */
export function eventFrame(seq: number, json: string): string {
  return `id: ${seq}\nevent: event\ndata: ${json}\n\n`;
}

/**
 * One event's frame, serialized and encoded once: the same bytes are written to every stream of
 * the session (a string would be encoded again by each stream's write).
 */
export interface EventFrame {
  seq: number;
  bytes: Buffer;
}

export interface SessionGroup {
  key: SessionKey;
  /** Every open stream of the session. */
  members: Set<Member>;
  /** The streams the shared read feeds: caught up to `position` (or writing the frames up to it). */
  live: Set<Member>;
  /** The last seq the shared read has read. */
  position: number;
  reading: boolean;
  /** Read once more even without a known new seq (a heartbeat, or a full page). */
  lookAgain: boolean;
  /** The newest seq the feed announced. */
  wantedSeq: number;
  unsubscribe(): void;
}

export interface Member {
  group: SessionGroup;
  sink: { write(chunk: string | Buffer): Promise<void>; end(): void };
  /** The request's Authorization header, checked again at every heartbeat. */
  authorization: string | undefined;
  /** The last seq written to this stream. */
  lastSeq: number;
  /** The frames being written, or its own catch-up; one at a time, so frames stay in order. */
  busy: Promise<void> | undefined;
  closed: boolean;
  lifetime: NodeJS.Timeout | undefined;
  /** Gives back the stream's slot under the caps. */
  release(): void;
  resolveEnded(): void;
}

export function newMember(fields: Pick<Member, 'group' | 'sink' | 'authorization' | 'lastSeq' | 'release' | 'resolveEnded'>): Member {
  return { ...fields, busy: undefined, closed: false, lifetime: undefined };
}

export const sessionTag = (key: SessionKey) => JSON.stringify([key.accountId, key.spaceId, key.userId, key.sessionId]);

/** A read of a session's events for its streams: the frames, and whether more may be stored after them. */
export interface GroupRead {
  frames: EventFrame[];
  more: boolean;
}

/**
 * The frames of up to `limit` events after `afterSeq`, in seq order, as far as `maxBytes` allows
 * (MAX_LIST_PAGE_BYTES, the event lists' page: the first always comes). Each event is written by
 * PostgreSQL as the event lists send it and framed unparsed: a catch-up through 200 events of
 * 256 KiB was parsed and serialized again in one go, holding the event loop for every tenant.
 */
export async function readForGroup(db: Database, key: SessionKey, afterSeq: number, limit: number, maxBytes: number): Promise<GroupRead> {
  const { rows, cutByBudget } = await listEventJsons(db, key, {}, { order: 'asc', cursorSeq: afterSeq, limit }, maxBytes);
  return { frames: rows.map((row) => ({ seq: row.seq, bytes: Buffer.from(eventFrame(row.seq, row.json)) })), more: cutByBudget || rows.length === limit };
}

/**
 * Called by a stream that has read everything stored after its seq: it joins the shared read when
 * that read has nothing it lacks, and answers whether it joined (else it reads again by itself).
 */
export function joinWhenCaughtUp(member: Member): boolean {
  const { group } = member;
  if (member.closed) return true;
  if (group.live.size === 0 && !group.reading) {
    // Nobody else depends on the shared position: it starts where this stream is.
    group.position = member.lastSeq;
  } else if (member.lastSeq < group.position) {
    return false; // the shared read went past this stream's last read: it reads the gap first
  }
  group.live.add(member);
  return true;
}
