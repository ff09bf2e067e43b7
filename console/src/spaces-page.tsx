import { useState } from 'preact/hooks';
import type { AgentSessionClient, SessionSpace } from './api.js';
import { FailureMessage, Pager, Section } from './components.js';
import { formatTime } from './format.js';
import { usePaged } from './paging.js';
import { setQuery, spaceHref } from './router.js';

export function SpacesPage({ client, query }: { client: AgentSessionClient; query: URLSearchParams }) {
  const nameLike = query.get('nameLike') ?? '';
  const [draft, setDraft] = useState(nameLike);
  const spaces = usePaged<SessionSpace>(nameLike, async (pageToken) => {
    const page = await client.listSessionSpaces({ pageSize: 20, ...(nameLike ? { nameLike } : {}), ...(pageToken ? { pageToken } : {}) });
    return { items: page.spaces, nextPageToken: page.nextPageToken };
  });
  return (
    <main>
      <h1>Spaces</h1>
      <Section title="Find a space" id="space-filter">
        <form
          class="filters"
          onSubmit={(event) => {
            event.preventDefault();
            setQuery({ nameLike: draft.trim() });
          }}
        >
          <div class="field">
            <label for="space-name">Name contains</label>
            <input id="space-name" value={draft} onInput={(event) => setDraft((event.target as HTMLInputElement).value)} />
          </div>
          <button type="submit">Filter</button>
        </form>
      </Section>
      <Section title="All spaces" id="space-list">
        <FailureMessage failure={spaces.failure} onRetry={spaces.reload} />
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Session spaces</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Space ID</th>
                <th scope="col">Description</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {spaces.items.map((space) => (
                <tr key={space.spaceId}>
                  <td>
                    <a href={spaceHref(space.spaceId)}>{space.name}</a>
                    {space.default ? <span class="badge">default</span> : null}
                  </td>
                  <td>
                    <code>{space.spaceId}</code>
                  </td>
                  <td>{space.description || '—'}</td>
                  <td class="nowrap">{formatTime(space.createTime)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {!spaces.loading && spaces.items.length === 0 && !spaces.failure ? <p>No space matches.</p> : null}
        <Pager paged={spaces} label="Spaces" />
      </Section>
    </main>
  );
}
