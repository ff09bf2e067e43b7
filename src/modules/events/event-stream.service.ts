// A session's events as server-sent event streams (docs/design.md §4.10): first the stored events
// after the caller's seq, then each new one as it is appended, in seq order, each exactly once.
// One EventStreams per instance holds every open stream, grouped by session.
//
// Round trips: opening costs the session check plus one page query per 200 stored events, or per
// MAX_LIST_PAGE_BYTES of them (the stream's own catch-up). After that the streams of a session read
// together: each time the feed (event-feed.ts) says the session has new events, one query reads
// them and every stream of the session gets the same frames, whatever the number of streams. Every
// heartbeat costs one query per session (is it still there; anything the feed missed) and one
// authorization per credential (from the credential cache, which the database's change
// notifications keep right). A stream that cannot keep up leaves the shared read and catches up
// alone, so it never holds the others back.
// Between reads a stream holds no database connection.
import type { AccountDatabases, Database } from '../../db/connect.js';
import type { EventFeed } from '../../db/event-feed.js';
import type { SessionKey } from '../../db/keys.js';
import { AppError, type ErrorCode } from '../../errors.js';
import type { EventStreams, Reauthorize } from '../../lib/event-streams.js';
import type { EventStreamCounts } from '../../lib/metrics-registry.js';
import { sessionNotFound } from '../sessions/index.js';
import { type EventFrame, type Member, type SessionGroup, joinWhenCaughtUp, newMember, readForGroup, sessionTag } from './event-stream-group.js';
import { findLiveSessionId } from './events.repository.js';

export type { EventStream, EventStreams, StreamSink } from '../../lib/event-streams.js';

/** Why the server ended a stream that had lived its maximum lifetime: the client reconnects with Last-Event-ID. */
export const STREAM_LIFETIME_EXCEEDED = 'StreamLifetimeExceeded';
/** Streams written to before the other work of the instance gets a turn (deliverToAll). */
const DELIVERY_SLICE = 50;
/** The heartbeat comment, encoded once for every stream. */
const HEARTBEAT = Buffer.from(': heartbeat\n\n');
/** The Retry-After (seconds) of a refusal at the cap: streams end at any time, so a short one. */
const CAP_RETRY_AFTER_SECONDS = '5';

export interface EventStreamsOptions {
  /**
   * The database as one account's (db/connect.ts): a stream's own reads (its session's check, its
   * catch-up) are its account's work. The reads a session's streams share and the heartbeat's are
   * no one account's (`db`). Without it every read is on `db`.
   */
  forAccount?: AccountDatabases;
  heartbeatMs: number;
  perAccount: number;
  perInstance: number;
  lifetimeMs: number;
  reauthorize: Reauthorize;
  /** Counted here, read by /metrics. */
  counts: EventStreamCounts;
  /** Events per query. */
  pageSize?: number;
  /** Bytes of events per query (the event lists' MAX_LIST_PAGE_BYTES). */
  pageBytes: number;
}

export function createEventStreams(db: Database, feed: EventFeed, options: EventStreamsOptions): EventStreams {
  const { heartbeatMs, perAccount, perInstance, lifetimeMs, reauthorize, counts, pageSize = 200, pageBytes, forAccount = () => db } = options;
  const groups = new Map<string, SessionGroup>();
  const openPerAccount = new Map<string, number>();
  let heartbeat: NodeJS.Timeout | undefined;

  const takeSlot = (accountId: string): (() => void) => {
    const mine = openPerAccount.get(accountId) ?? 0;
    if (counts.open >= perInstance) {
      throw new AppError('RequestLimitExceeded', `This instance serves at most ${perInstance} event streams at once; retry later.`, {
        headers: { 'retry-after': CAP_RETRY_AFTER_SECONDS },
      });
    }
    if (mine >= perAccount) {
      throw new AppError('RequestLimitExceeded', `An account may have at most ${perAccount} event streams open at once on an instance; close one first.`, {
        headers: { 'retry-after': CAP_RETRY_AFTER_SECONDS },
      });
    }
    openPerAccount.set(accountId, mine + 1);
    counts.open++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      counts.open--;
      const left = (openPerAccount.get(accountId) ?? 1) - 1;
      if (left === 0) openPerAccount.delete(accountId);
      else openPerAccount.set(accountId, left);
    };
  };

  const groupOf = (key: SessionKey): SessionGroup => {
    const tag = sessionTag(key);
    let group = groups.get(tag);
    if (!group) {
      const created: SessionGroup = { key, members: new Set(), live: new Set(), position: 0, reading: false, lookAgain: false, wantedSeq: 0, unsubscribe: () => {} };
      created.unsubscribe = feed.subscribe(key, (seq) => wake(created, seq));
      groups.set(tag, created);
      group = created;
    }
    return group;
  };

  const end = (member: Member, reason: ErrorCode | typeof STREAM_LIFETIME_EXCEEDED | undefined) => {
    if (member.closed) return;
    member.closed = true;
    clearTimeout(member.lifetime);
    const { group } = member;
    group.members.delete(member);
    group.live.delete(member);
    if (group.members.size === 0) {
      group.unsubscribe();
      groups.delete(sessionTag(group.key));
    }
    if (groups.size === 0 && heartbeat) {
      clearInterval(heartbeat);
      heartbeat = undefined;
    }
    // The frames in flight are already in the sink's buffer, in order: the end frame comes last.
    if (reason !== undefined) void member.sink.write(`event: end\ndata: ${JSON.stringify({ reason })}\n\n`);
    member.sink.end();
    member.release();
    member.resolveEnded();
  };

  // A stream on its own: reads after its seq until it reaches the session's shared position, then joins.
  const catchUp = (member: Member) => {
    member.busy = (async () => {
      for (;;) {
        if (member.closed) return;
        const { frames, more } = await readForGroup(forAccount(member.group.key.accountId), member.group.key, member.lastSeq, pageSize, pageBytes);
        counts.catchUpReads++;
        for (const frame of frames) {
          if (member.closed) return;
          await member.sink.write(frame.bytes);
          member.lastSeq = frame.seq;
        }
        if (!more && joinWhenCaughtUp(member)) {
          // An append announced while no stream was in the shared read has not been read yet.
          const { group } = member;
          if (!member.closed && group.wantedSeq > group.position) wake(group, group.wantedSeq);
          return;
        }
      }
    })()
      .catch(() => end(member, 'ResourceUnavailable.Database'))
      .finally(() => (member.busy = undefined));
  };

  const deliver = (member: Member, frames: EventFrame[]) => {
    const fresh = frames.filter((frame) => frame.seq > member.lastSeq);
    if (fresh.length === 0) return;
    if (member.busy) {
      // Still writing the previous frames (a slow client): it leaves the shared read and, once its
      // writes are done, reads what it missed by itself.
      member.group.live.delete(member);
      void member.busy.then(() => member.closed || member.group.live.has(member) || catchUp(member));
      return;
    }
    member.busy = (async () => {
      for (const frame of fresh) {
        if (member.closed) return;
        await member.sink.write(frame.bytes);
        member.lastSeq = frame.seq;
      }
    })().finally(() => (member.busy = undefined));
  };

  // Every socket write is a system call: a thousand streams of one session take a while to serve,
  // so they are served a slice at a time, letting the other requests of the instance in between.
  const deliverToAll = async (group: SessionGroup, frames: EventFrame[]) => {
    if (frames.length === 0) return;
    let served = 0;
    for (const member of [...group.live]) {
      if (served > 0 && served % DELIVERY_SLICE === 0) await new Promise((resolve) => setImmediate(resolve));
      if (!member.closed && group.live.has(member)) deliver(member, frames);
      served++;
    }
  };

  // One read at a time per session. A wake-up for a seq already read costs nothing, so the feed's
  // poll confirming what this instance's append already announced reads nothing.
  const wake = (group: SessionGroup, seq: number | undefined) => {
    if (seq === undefined) group.lookAgain = true;
    else if (seq > group.position) group.wantedSeq = Math.max(group.wantedSeq, seq);
    else return;
    if (group.reading) return;
    group.reading = true;
    void (async () => {
      while (group.live.size > 0 && (group.lookAgain || group.wantedSeq > group.position)) {
        group.lookAgain = false;
        const { frames, more } = await readForGroup(db, group.key, group.position, pageSize, pageBytes);
        counts.sharedReads++;
        const last = frames.at(-1);
        if (last) group.position = last.seq;
        await deliverToAll(group, frames);
        if (more) group.lookAgain = true;
        // Nothing newer is stored: a wanted seq the read did not find is not waited for.
        else group.wantedSeq = Math.min(group.wantedSeq, group.position);
      }
    })()
      // The database is unreachable: the streams end and their clients reconnect with Last-Event-ID.
      .catch(() => [...group.live].forEach((member) => end(member, 'ResourceUnavailable.Database')))
      .finally(() => (group.reading = false));
  };

  // Every stream is checked at every heartbeat: the session, then the principal, exactly as a new
  // request would be, so that a revocation ends the stream within one heartbeat.
  const beat = async () => {
    const checks = new Map<string, Promise<ErrorCode | undefined>>();
    const recheck = (member: Member) => {
      const memo = `${member.group.key.spaceId}\n${member.authorization ?? ''}`;
      let check = checks.get(memo);
      if (!check) {
        check = reauthorize(member.authorization, member.group.key.spaceId).then(
          () => undefined,
          (error: unknown) => (error instanceof AppError ? error.code : 'ResourceUnavailable.Database'),
        );
        checks.set(memo, check);
      }
      return check;
    };
    const checkGroup = async (group: SessionGroup) => {
      const members = [...group.members];
      for (const member of members) void member.sink.write(HEARTBEAT);
      const live = await findLiveSessionId(db, group.key).then(Boolean, () => undefined);
      if (live === false) return members.forEach((member) => end(member, 'ResourceNotFound.Session'));
      await Promise.all(
        members.map(async (member) => {
          const refused = await recheck(member);
          if (refused) end(member, refused);
        }),
      );
      wake(group, undefined);
    };
    // Two sessions at a time: a heartbeat over many sessions must not take the whole pool at once.
    const queue = [...groups.values()];
    const worker = async () => {
      for (let group = queue.shift(); group; group = queue.shift()) await checkGroup(group);
    };
    await Promise.all([worker(), worker()]);
  };

  return {
    async open(key, afterSeq, sink, authorization) {
      const release = takeSlot(key.accountId);
      try {
        const accountDb = forAccount(key.accountId);
        if (!(await findLiveSessionId(accountDb, key))) throw await sessionNotFound(accountDb, key);
      } catch (error) {
        release();
        throw error;
      }
      let resolveEnded!: () => void;
      const ended = new Promise<void>((resolve) => (resolveEnded = resolve));
      const member = newMember({ group: groupOf(key), sink, authorization, lastSeq: afterSeq, release, resolveEnded });
      member.group.members.add(member);
      member.lifetime = setTimeout(() => end(member, STREAM_LIFETIME_EXCEEDED), lifetimeMs);
      member.lifetime.unref();
      if (!heartbeat) {
        // A heartbeat still checking (a slow database) is not overlapped by the next one.
        let beating = false;
        // The heartbeat checks every account's streams: its reads are no one account's (db, db/fair-pool.ts).
        heartbeat = setInterval(() => {
          if (beating) return;
          beating = true;
          void beat().finally(() => (beating = false));
        }, heartbeatMs);
        heartbeat.unref();
      }
      // The browser's EventSource reconnects after `retry` milliseconds on its own.
      await sink.write('retry: 1000\n\n');
      catchUp(member);
      return { close: () => end(member, undefined), ended };
    },
    closeAll() {
      for (const group of [...groups.values()]) for (const member of [...group.members]) end(member, undefined);
    },
  };
}
