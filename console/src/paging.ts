// Keyset paging as the API offers it: a page token forward, and the tokens already seen to go back.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { describeError } from './api.js';

export interface Page<T> {
  items: T[];
  nextPageToken?: string | undefined;
}

export interface Paged<T> {
  items: T[];
  loading: boolean;
  error: string | undefined;
  pageNumber: number;
  hasNext: boolean;
  next(): void;
  previous(): void;
  reload(): void;
  /** Adds an item at the end of the loaded page (live updates). */
  append(item: T): void;
}

/** Loads the first page again whenever `key` changes (the filters). */
export function usePaged<T>(key: string, load: (pageToken: string | undefined) => Promise<Page<T>>): Paged<T> {
  const [tokens, setTokens] = useState<Array<string | undefined>>([undefined]);
  const [page, setPage] = useState<Page<T>>({ items: [] });
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | undefined>();
  const [reloads, setReloads] = useState(0);

  useEffect(() => setTokens([undefined]), [key]);
  const current = tokens[tokens.length - 1];
  useEffect(() => {
    let cancelled = false;
    setLoading(true);
    setError(undefined);
    load(current).then(
      (result) => !cancelled && (setPage(result), setLoading(false)),
      (failure: unknown) => !cancelled && (setError(describeError(failure)), setPage({ items: [] }), setLoading(false)),
    );
    return () => {
      cancelled = true;
    };
    // `load` is rebuilt on each render: `key` names everything it depends on.
  }, [key, current, reloads]);

  return {
    items: page.items,
    loading,
    error,
    pageNumber: tokens.length,
    hasNext: page.nextPageToken !== undefined,
    next: useCallback(() => page.nextPageToken && setTokens((seen) => [...seen, page.nextPageToken]), [page.nextPageToken]),
    previous: useCallback(() => setTokens((seen) => (seen.length > 1 ? seen.slice(0, -1) : seen)), []),
    reload: useCallback(() => setReloads((n) => n + 1), []),
    append: useCallback((item: T) => setPage((loaded) => ({ ...loaded, items: [...loaded.items, item] })), []),
  };
}
