// A session: its fields, state by scope, memo and window, the timeline, state at event N, live
// updates from the event stream, export and delete.
import { useEffect, useRef, useState } from 'preact/hooks';
import { type AgentSessionClient, type Failure, type Session, type SessionAction, type SessionEvent, toFailure } from './api.js';
import { FailureMessage, JsonView, Pager, Section, SpaceName } from './components.js';
import { EventCard } from './event-card.js';
import { RESERVED_METADATA, formatTime, pretty, splitScopes } from './format.js';
import { useLoaded, usePaged } from './paging.js';
import { spaceHref } from './router.js';
import { StateAtPanel } from './state-at-panel.js';

interface Ids {
  spaceId: string;
  userId: string;
  sessionId: string;
}

type Loaded = Session & { etag: string };

export function SessionPage({ client, ids }: { client: AgentSessionClient; ids: Ids }) {
  const key = `${ids.spaceId}/${ids.userId}/${ids.sessionId}`;
  const described = useLoaded<Loaded>(key, () => client.describeSession(ids));
  const session = described.value;
  // For the breadcrumb only: without it (no permission, say) the crumb shows the id.
  const space = useLoaded(ids.spaceId, () => client.describeSessionSpace({ spaceId: ids.spaceId }));
  const [actions, setActions] = useState<ReadonlySet<SessionAction>>(new Set());
  const [stateAt, setStateAt] = useState<number | undefined>();
  const [deleted, setDeleted] = useState(false);

  useEffect(() => {
    client.getSpacePermissions({ spaceId: ids.spaceId }).then(
      (permissions) => setActions(new Set(permissions.actions)),
      () => setActions(new Set()),
    );
  }, [key]);

  if (deleted) {
    return (
      <main>
        <h1>Session deleted</h1>
        <p role="status">
          Session <code>{ids.sessionId}</code> and its events were deleted. <a href={spaceHref(ids.spaceId)}>Back to the space</a>
        </p>
      </main>
    );
  }
  return (
    <main>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="#/spaces">Spaces</a> / <SpaceName spaceId={ids.spaceId} space={space.value} href={spaceHref(ids.spaceId)} /> / <a href={spaceHref(ids.spaceId, { userId: ids.userId })}>{ids.userId}</a> / {ids.sessionId}
      </nav>
      <h1>{session ? session.title || '(untitled session)' : 'Session'}</h1>
      <FailureMessage failure={described.failure} onRetry={described.reload} />
      {session ? (
        <>
          <SessionActions client={client} ids={ids} session={session} actions={actions} onDeleted={() => setDeleted(true)} />
          <div class="columns">
            <Overview session={session} />
            <StateSection session={session} />
          </div>
          <div class={stateAt === undefined ? 'history' : 'history with-state'}>
            <Timeline client={client} ids={ids} startAfterSeq={session.eventCount} selected={stateAt} onShowState={setStateAt} onAppended={described.reload} />
            {stateAt !== undefined ? <StateAtPanel client={client} ids={ids} seq={stateAt} onClose={() => setStateAt(undefined)} /> : null}
          </div>
        </>
      ) : null}
    </main>
  );
}

function Overview({ session }: { session: Session }) {
  const reserved = Object.entries(RESERVED_METADATA).filter(([key]) => session.metadata[key] !== undefined);
  const custom = Object.entries(session.metadata).filter(([key]) => !(key in RESERVED_METADATA));
  return (
    <Section title="Overview" id="overview">
      <dl class="facts">
        <dt>Session ID</dt>
        <dd><code>{session.sessionId}</code></dd>
        <dt>User</dt>
        <dd>{session.userId}</dd>
        <dt>Revision</dt>
        <dd data-testid="revision">{session.revision}</dd>
        <dt>Events</dt>
        <dd data-testid="event-count">{session.eventCount}</dd>
        <dt>Created</dt>
        <dd>{formatTime(session.createTime)}</dd>
        <dt>Updated</dt>
        <dd>{formatTime(session.updateTime)}</dd>
        <dt>Expires</dt>
        <dd>{session.expireTime ? formatTime(session.expireTime) : 'Never'}</dd>
        {reserved.map(([key, label]) => (
          <>
            <dt key={`${key}-label`}>{label}</dt>
            <dd key={key}>
              <code>{session.metadata[key]}</code> <span class="muted small">({key})</span>
            </dd>
          </>
        ))}
      </dl>
      <h3>Metadata</h3>
      {custom.length === 0 ? (
        <p class="muted">No other metadata.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Metadata</caption>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Value</th>
              </tr>
            </thead>
            <tbody>
              {custom.map(([name, value]) => (
                <tr key={name}>
                  <td><code>{name}</code></td>
                  <td>{value}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h3>Memo and context window</h3>
      <p>
        The context window starts at event <strong data-testid="window-start">{session.windowStartSeq}</strong>
        {session.windowStartSeq > 1 ? ` (events before it are summarised in the memo)` : ' (the whole history)'}.
      </p>
      {session.memo === null ? <p class="muted">No memo.</p> : <JsonView value={session.memo} label="Memo" />}
    </Section>
  );
}

function StateSection({ session }: { session: Session }) {
  const scopes = splitScopes(session.state);
  return (
    <Section title="State" id="state">
      <h3>Merged state</h3>
      <JsonView value={session.state} label="Merged state" />
      <h3>Session scope</h3>
      <JsonView value={scopes.session} label="Session-scoped state" />
      <h3>
        User scope <code>user:</code>
      </h3>
      <JsonView value={scopes.user} label="User-scoped state" />
      <h3>
        App scope <code>app:</code>
      </h3>
      <JsonView value={scopes.app} label="App-scoped state" />
    </Section>
  );
}

function download(name: string, type: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1_000);
}

function SessionActions({ client, ids, session, actions, onDeleted }: { client: AgentSessionClient; ids: Ids; session: Loaded; actions: ReadonlySet<SessionAction>; onDeleted: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [failure, setFailure] = useState<Failure | undefined>();
  const [busy, setBusy] = useState(false);
  const exportAs = async (format: 'json' | 'yaml') => {
    setFailure(undefined);
    try {
      const document = await client.exportSession({ ...ids, format });
      const text = typeof document === 'string' ? document : `${pretty(document)}\n`;
      download(`${ids.sessionId}.${format}`, format === 'json' ? 'application/json' : 'application/yaml', text);
    } catch (error) {
      setFailure(toFailure(error));
    }
  };
  const confirmDelete = async () => {
    setBusy(true);
    setFailure(undefined);
    try {
      await client.deleteSession(ids, { ifMatch: session.etag });
      dialog.current?.close();
      onDeleted();
    } catch (error) {
      setFailure(toFailure(error));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="actions" role="group" aria-label="Session actions">
      {actions.has('session:ExportSession') ? (
        <>
          <button type="button" onClick={() => void exportAs('json')}>Export JSON</button>
          <button type="button" onClick={() => void exportAs('yaml')}>Export YAML</button>
        </>
      ) : null}
      {actions.has('session:DeleteSession') ? (
        <button type="button" class="danger" onClick={() => (setFailure(undefined), dialog.current?.showModal())}>
          Delete session
        </button>
      ) : null}
      {!actions.has('session:DeleteSession') && !actions.has('session:ExportSession') ? <span class="muted">Read-only access</span> : null}
      {!dialog.current?.open ? <FailureMessage failure={failure} /> : null}
      <dialog ref={dialog} aria-labelledby="delete-heading">
        <h2 id="delete-heading">Delete this session?</h2>
        <p>
          Session <code>{ids.sessionId}</code> of user <code>{ids.userId}</code> and its {session.eventCount} events will be deleted. This cannot be undone. It is deleted only if it is still at revision {session.revision} (If-Match).
        </p>
        <FailureMessage failure={failure} />
        <div class="buttons">
          <button type="button" class="danger" disabled={busy} onClick={() => void confirmDelete()}>
            Delete permanently
          </button>
          <button type="button" class="secondary" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
        </div>
      </dialog>
    </div>
  );
}

const toIso = (local: string) => (local ? new Date(`${local}Z`).toISOString() : '');

function Timeline({
  client,
  ids,
  startAfterSeq,
  selected,
  onShowState,
  onAppended,
}: {
  client: AgentSessionClient;
  ids: Ids;
  startAfterSeq: number;
  selected: number | undefined;
  onShowState: (seq: number) => void;
  onAppended: () => void;
}) {
  const empty = { author: '', after: '', before: '', afterSeq: '' };
  const [draft, setDraft] = useState(empty);
  const [filters, setFilters] = useState(empty);
  const [live, setLive] = useState<{ status: 'connecting' | 'live' | 'stopped'; received: number; last?: number }>({ status: 'connecting', received: 0 });
  const filtered = Object.values(filters).some((value) => value !== '');
  const events = usePaged<SessionEvent>(`${ids.spaceId}/${ids.userId}/${ids.sessionId}?${JSON.stringify(filters)}`, async (pageToken) => {
    const page = await client.listEvents({
      ...ids,
      pageSize: 50,
      ...(filters.author ? { author: filters.author } : {}),
      ...(filters.after ? { after: toIso(filters.after) } : {}),
      ...(filters.before ? { before: toIso(filters.before) } : {}),
      ...(filters.afterSeq ? { afterSeq: Number(filters.afterSeq) } : {}),
      ...(pageToken ? { pageToken } : {}),
    });
    return { items: page.events, nextPageToken: page.nextPageToken };
  });

  // Live: every event appended after the page was opened, through the event stream.
  const latest = useRef({ events, filtered });
  latest.current = { events, filtered };
  useEffect(() => {
    const controller = new AbortController();
    void (async () => {
      try {
        setLive({ status: 'live', received: 0 });
        let received = 0;
        for await (const event of client.streamEvents({ ...ids, afterSeq: startAfterSeq }, { signal: controller.signal })) {
          received++;
          setLive({ status: 'live', received, last: event.seq });
          const view = latest.current;
          // Shown in place when the timeline is at its end; otherwise the pager reaches it.
          if (!view.filtered && !view.events.hasNext && !view.events.loading && !view.events.items.some((item) => item.seq >= event.seq)) view.events.append(event);
          onAppended();
        }
        if (!controller.signal.aborted) setLive((state) => ({ ...state, status: 'stopped' }));
      } catch {
        if (!controller.signal.aborted) setLive((state) => ({ ...state, status: 'stopped' }));
      }
    })();
    return () => controller.abort();
  }, [ids.spaceId, ids.userId, ids.sessionId]);

  const field = (name: keyof typeof empty) => ({
    id: `events-${name}`,
    value: draft[name],
    onInput: (event: Event) => setDraft({ ...draft, [name]: (event.target as HTMLInputElement).value }),
  });
  return (
    <Section title="Timeline" id="timeline">
      <p class="live" role="status" aria-live="polite" data-testid="live-status">
        <span class={`dot ${live.status}`} aria-hidden="true" />
        {live.status === 'live' ? `Live: ${live.received} new event${live.received === 1 ? '' : 's'}${live.last ? ` (latest #${live.last})` : ''}` : live.status === 'connecting' ? 'Connecting…' : 'Live updates stopped: reload to resume'}
      </p>
      <form
        class="filters"
        aria-label="Event filters"
        onSubmit={(event) => {
          event.preventDefault();
          setFilters(draft);
        }}
      >
        <div class="field">
          <label for="events-author">Author</label>
          <input {...field('author')} />
        </div>
        <div class="field datetime">
          <label for="events-after">After (UTC)</label>
          <input type="datetime-local" step="1" {...field('after')} />
        </div>
        <div class="field datetime">
          <label for="events-before">Before (UTC)</label>
          <input type="datetime-local" step="1" {...field('before')} />
        </div>
        <div class="field">
          <label for="events-afterSeq">After seq</label>
          <input type="number" min="0" inputMode="numeric" {...field('afterSeq')} />
        </div>
        <div class="buttons">
          <button type="submit">Filter events</button>
          <button type="button" class="secondary" onClick={() => (setDraft(empty), setFilters(empty))}>
            Clear
          </button>
        </div>
      </form>
      <FailureMessage failure={events.failure} onRetry={events.reload} />
      <ol class="timeline" aria-label="Events">
        {events.items.map((event) => (
          <EventCard key={event.seq} event={event} selected={selected === event.seq} onShowState={onShowState} />
        ))}
      </ol>
      {!events.loading && events.items.length === 0 && !events.failure ? <p>No events{filtered ? ' match' : ' yet'}.</p> : null}
      <Pager paged={events} label="Events" />
    </Section>
  );
}
