import { useEffect, useRef, useState } from 'preact/hooks';
import type { AgentSessionClient, Session, SpaceUser } from './api.js';
import { FailureMessage, Pager, Section, SpaceName } from './components.js';
import { RESERVED_METADATA, formatTime } from './format.js';
import { useLoaded, usePaged } from './paging.js';
import { sessionHref, setQuery, spaceHref } from './router.js';

type Filters = Record<'userId' | 'title' | 'titleLike' | 'metadata' | 'orderBy' | 'order', string>;

function filtersOf(query: URLSearchParams): Filters {
  return {
    userId: query.get('userId') ?? '',
    title: query.get('title') ?? '',
    titleLike: query.get('titleLike') ?? '',
    metadata: query.get('metadata') ?? '',
    orderBy: query.get('orderBy') ?? 'updateTime',
    order: query.get('order') ?? 'desc',
  };
}

export function SpacePage({ client, spaceId, query }: { client: AgentSessionClient; spaceId: string; query: URLSearchParams }) {
  const described = useLoaded(spaceId, () => client.describeSessionSpace({ spaceId }));
  const space = described.value;

  const filters = filtersOf(query);
  const [draft, setDraft] = useState(filters);
  // The form follows the URL when its filters change (Apply, Back, a link), never on the first
  // render: an effect runs a frame after it, and by then a quick typist's text would be replaced.
  const shownQuery = useRef(query.toString());
  useEffect(() => {
    if (shownQuery.current === query.toString()) return;
    shownQuery.current = query.toString();
    setDraft(filtersOf(query));
  }, [query.toString()]);

  const users = usePaged<SpaceUser>(spaceId, async (pageToken) => {
    const page = await client.listSpaceUsers({ spaceId, pageSize: 20, ...(pageToken ? { pageToken } : {}) });
    return { items: page.users, nextPageToken: page.nextPageToken };
  });
  const metadata = filters.metadata
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  const sessions = usePaged<Session>(`${spaceId}?${query.toString()}`, async (pageToken) => {
    const page = await client.listSpaceSessions({
      spaceId,
      pageSize: 20,
      orderBy: filters.orderBy as 'updateTime' | 'createTime',
      order: filters.order as 'asc' | 'desc',
      ...(filters.userId ? { userId: [filters.userId] } : {}),
      ...(filters.title ? { title: filters.title } : {}),
      ...(filters.titleLike ? { titleLike: filters.titleLike } : {}),
      ...(metadata.length > 0 ? { metadata } : {}),
      ...(pageToken ? { pageToken } : {}),
    });
    return { items: page.sessions, nextPageToken: page.nextPageToken };
  });

  const input = (field: keyof Filters) => ({
    id: `filter-${field}`,
    value: draft[field],
    onInput: (event: Event) => setDraft({ ...draft, [field]: (event.target as HTMLInputElement).value }),
  });

  return (
    <main>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="#/spaces">Spaces</a> / <SpaceName spaceId={spaceId} space={space} />
      </nav>
      <h1>{space ? space.name : 'Space'}</h1>
      <FailureMessage failure={described.failure} onRetry={described.reload} />
      {space ? (
        <p class="muted">
          <code>{space.spaceId}</code> {space.description ? `· ${space.description}` : ''}
        </p>
      ) : null}
      <div class="columns">
        <Section title="Users" id="users">
          <FailureMessage failure={users.failure} onRetry={users.reload} />
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">Business users of this space</caption>
              <thead>
                <tr>
                  <th scope="col">User</th>
                  <th scope="col">Sessions</th>
                  <th scope="col">Last activity</th>
                </tr>
              </thead>
              <tbody>
                {users.items.map((user) => (
                  <tr key={user.userId}>
                    <td>
                      <a href={spaceHref(spaceId, { userId: user.userId })} aria-label={`Sessions of user ${user.userId}`}>
                        {user.userId}
                      </a>
                    </td>
                    <td class="nowrap">{user.sessionCount}</td>
                    <td class="nowrap">{formatTime(user.lastActivityTime)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {!users.loading && users.items.length === 0 && !users.failure ? <p>No users yet.</p> : null}
          <Pager paged={users} label="Users" />
        </Section>
        <Section title="Sessions" id="sessions">
          <form
            class="filters"
            aria-label="Session filters"
            onSubmit={(event) => {
              event.preventDefault();
              setQuery({ ...draft, ...(draft.orderBy === 'updateTime' ? { orderBy: '' } : {}), ...(draft.order === 'desc' ? { order: '' } : {}) });
            }}
          >
            <div class="field">
              <label for="filter-userId">User ID</label>
              <input {...input('userId')} />
            </div>
            <div class="field">
              <label for="filter-title">Title (exact)</label>
              <input {...input('title')} />
            </div>
            <div class="field">
              <label for="filter-titleLike">Title contains</label>
              <input {...input('titleLike')} />
            </div>
            <div class="field wide">
              <label for="filter-metadata">Metadata (key=value, one per line)</label>
              <textarea rows={2} {...input('metadata')} />
            </div>
            <div class="field">
              <label for="filter-orderBy">Order by</label>
              <select {...input('orderBy')}>
                <option value="updateTime">Last update</option>
                <option value="createTime">Creation</option>
              </select>
            </div>
            <div class="field">
              <label for="filter-order">Order</label>
              <select {...input('order')}>
                <option value="desc">Newest first</option>
                <option value="asc">Oldest first</option>
              </select>
            </div>
            <div class="buttons">
              <button type="submit">Apply filters</button>
              <button type="button" class="secondary" onClick={() => setQuery({})}>
                Clear
              </button>
            </div>
          </form>
          <FailureMessage failure={sessions.failure} onRetry={sessions.reload} />
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">Sessions of this space</caption>
              <thead>
                <tr>
                  <th scope="col">Title</th>
                  <th scope="col">User</th>
                  <th scope="col">Deployment</th>
                  <th scope="col">Affinity</th>
                  <th scope="col">Events</th>
                  <th scope="col">{filters.orderBy === 'createTime' ? 'Created' : 'Updated'}</th>
                </tr>
              </thead>
              <tbody>
                {sessions.items.map((session) => (
                  <tr key={`${session.userId}/${session.sessionId}`}>
                    <td>
                      <a href={sessionHref(session)}>{session.title || session.sessionId}</a>
                      {session.title ? <div class="muted small">{session.sessionId}</div> : null}
                    </td>
                    <td>{session.userId}</td>
                    {Object.keys(RESERVED_METADATA).map((key) => (
                      <td key={key}>{session.metadata[key] ? <code>{session.metadata[key]}</code> : '—'}</td>
                    ))}
                    <td class="nowrap">{session.eventCount}</td>
                    <td class="nowrap">{formatTime(filters.orderBy === 'createTime' ? session.createTime : session.updateTime)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {!sessions.loading && sessions.items.length === 0 && !sessions.failure ? <p>No session matches.</p> : null}
          <Pager paged={sessions} label="Sessions" />
        </Section>
      </div>
    </main>
  );
}
