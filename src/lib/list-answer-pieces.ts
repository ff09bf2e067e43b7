// A list answer, `{"<items>":[…],"nextPageToken":…,"totalCount":…}`, as pieces of JSON text around
// items that are JSON text already (written by PostgreSQL): left unjoined, so that a large answer
// can be written piece by piece (http/view-serializer.ts, sendJsonPieces).

/** A list page's rows (of any shape) and what its answer carries besides them. */
export interface ListPage<Row> {
  rows: Row[];
  nextPageToken?: string;
  totalCount?: number;
}

export function listAnswerPieces(field: string, items: string[], more: Omit<ListPage<unknown>, 'rows'>): string[] {
  const pieces = [`{${JSON.stringify(field)}:[`];
  items.forEach((item, index) => pieces.push(index === 0 ? item : `,${item}`));
  const next = more.nextPageToken === undefined ? '' : `,"nextPageToken":${JSON.stringify(more.nextPageToken)}`;
  const total = more.totalCount === undefined ? '' : `,"totalCount":${more.totalCount}`;
  pieces.push(`]${next}${total}}`);
  return pieces;
}
