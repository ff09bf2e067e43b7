// Offset/Limit paging (the API 3.0 models') over the service's keyset lists (the REST API's):
// the pages before Offset are read and skipped, so both faces list through the same queries and
// rules. Reading Offset rows costs Offset/pageSize extra queries: fine for the admin-sized lists
// these actions serve; deep offsets into big lists are what the REST API's page tokens are for.
export interface KeysetPage<T> {
  items: T[];
  nextPageToken?: string | undefined;
  totalCount?: number | undefined;
}

/** `fetchPage(pageSize, pageToken, includeTotal)` is asked for the total on the first page only. */
export async function pageByOffset<T>(
  offset: number,
  limit: number,
  maxPageSize: number,
  fetchPage: (pageSize: number, pageToken: string | undefined, includeTotal: boolean) => Promise<KeysetPage<T>>,
): Promise<{ items: T[]; totalCount: number }> {
  const wanted = offset + limit;
  const items: T[] = [];
  let pageToken: string | undefined;
  let totalCount = 0;
  for (let first = true; ; first = false) {
    const page = await fetchPage(Math.min(maxPageSize, wanted - items.length), pageToken, first);
    if (first) totalCount = page.totalCount ?? 0;
    items.push(...page.items);
    pageToken = page.nextPageToken;
    if (!pageToken || items.length >= wanted) break;
  }
  return { items: items.slice(offset, wanted), totalCount };
}
