// Hash routes (#/spaces/…), so the service serves one page for the whole console and a reload
// keeps the place. Filters and paging live in the route's query, so links can be shared.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'spaces'; query: URLSearchParams }
  | { page: 'space'; spaceId: string; query: URLSearchParams }
  | { page: 'session'; spaceId: string; userId: string; sessionId: string; query: URLSearchParams }
  | { page: 'not-found'; query: URLSearchParams };

export function parseRoute(hash: string): Route {
  const [path = '', search = ''] = hash.replace(/^#/, '').split('?');
  const query = new URLSearchParams(search);
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0 || (parts.length === 1 && parts[0] === 'spaces')) return { page: 'spaces', query };
  if (parts[0] === 'spaces' && parts.length === 2) return { page: 'space', spaceId: parts[1]!, query };
  if (parts[0] === 'spaces' && parts[2] === 'users' && parts[4] === 'sessions' && parts.length === 6) {
    return { page: 'session', spaceId: parts[1]!, userId: parts[3]!, sessionId: parts[5]!, query };
  }
  return { page: 'not-found', query };
}

export const spaceHref = (spaceId: string, query?: Record<string, string>) => `#/spaces/${encodeURIComponent(spaceId)}${queryText(query)}`;
export const sessionHref = (s: { spaceId: string; userId: string; sessionId: string }) =>
  `#/spaces/${encodeURIComponent(s.spaceId)}/users/${encodeURIComponent(s.userId)}/sessions/${encodeURIComponent(s.sessionId)}`;

function queryText(query: Record<string, string> | undefined): string {
  const entries = Object.entries(query ?? {}).filter(([, value]) => value !== '');
  return entries.length === 0 ? '' : `?${new URLSearchParams(entries).toString()}`;
}

/** Replaces the current route's query (filters, page) without a new history entry per keystroke. */
export function setQuery(values: Record<string, string>): void {
  const [hashPath = ''] = location.hash.split('?');
  const path = hashPath === '' || hashPath === '#' ? '#/spaces' : hashPath;
  history.replaceState(null, '', `${path}${queryText(values)}`);
  dispatchEvent(new HashChangeEvent('hashchange'));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', update);
    return () => removeEventListener('hashchange', update);
  }, []);
  return route;
}
