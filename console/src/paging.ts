// Loading from the API: keyset paging as the API offers it (a page token forward, and the tokens
// already seen to go back), and a single value; both keep the failure for a Retry.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { type Failure, toFailure } from './api.js';

export interface Page<T> {
  items: T[];
  nextPageToken?: string | undefined;
}

export interface Paged<T> {
  items: T[];
  loading: boolean;
  failure: Failure | undefined;
  pageNumber: number;
  hasNext: boolean;
  next(): void;
  previous(): void;
  /** Loads the current page again (Retry after a failure). */
  reload(): void;
  /** Adds an item at the end of the loaded page (live updates). */
  append(item: T): void;
}

/** Loads the first page again whenever `key` changes (the filters). */
export function usePaged<T>(key: string, load: (pageToken: string | undefined) => Promise<Page<T>>): Paged<T> {
  const [tokens, setTokens] = useState<Array<string | undefined>>([undefined]);
  const [page, setPage] = useState<Page<T>>({ items: [] });
  const [loading, setLoading] = useState(true);
  const [failure, setFailure] = useState<Failure | undefined>();
  const [reloads, setReloads] = useState(0);

  useEffect(() => setTokens([undefined]), [key]);
  const current = tokens[tokens.length - 1];
  useEffect(() => {
    let cancelled = false;
    setLoading(true);
    setFailure(undefined);
    load(current).then(
      (result) => !cancelled && (setPage(result), setLoading(false)),
      (error: unknown) => !cancelled && (setFailure(toFailure(error)), setPage({ items: [] }), setLoading(false)),
    );
    return () => {
      cancelled = true;
    };
    // `load` is rebuilt on each render: `key` names everything it depends on.
  }, [key, current, reloads]);

  return {
    items: page.items,
    loading,
    failure,
    pageNumber: tokens.length,
    hasNext: page.nextPageToken !== undefined,
    next: useCallback(() => page.nextPageToken && setTokens((seen) => [...seen, page.nextPageToken]), [page.nextPageToken]),
    previous: useCallback(() => setTokens((seen) => (seen.length > 1 ? seen.slice(0, -1) : seen)), []),
    reload: useCallback(() => setReloads((n) => n + 1), []),
    append: useCallback((item: T) => setPage((loaded) => ({ ...loaded, items: [...loaded.items, item] })), []),
  };
}

export interface Loaded<T> {
  /** The value loaded for the current key; undefined until it arrives. */
  value: T | undefined;
  failure: Failure | undefined;
  /** Runs the load again (Retry, or fresher data); the value already shown stays meanwhile. */
  reload(): void;
}

/** One value loaded whenever `key` changes (what `load` depends on). */
export function useLoaded<T>(key: string, load: () => Promise<T>): Loaded<T> {
  const [loaded, setLoaded] = useState<{ key: string; value: T } | undefined>();
  const [failure, setFailure] = useState<Failure | undefined>();
  const [reloads, setReloads] = useState(0);
  useEffect(() => {
    let cancelled = false;
    setFailure(undefined);
    load().then(
      (value) => !cancelled && setLoaded({ key, value }),
      (error: unknown) => !cancelled && setFailure(toFailure(error)),
    );
    return () => {
      cancelled = true;
    };
    // `load` is rebuilt on each render: `key` names everything it depends on.
  }, [key, reloads]);
  return {
    // A value of another key is never shown under this one's heading.
    value: loaded?.key === key ? loaded.value : undefined,
    failure,
    reload: useCallback(() => setReloads((n) => n + 1), []),
  };
}
