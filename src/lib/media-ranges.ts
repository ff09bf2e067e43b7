// An Accept header read as its media ranges (RFC 9110 §12.5.1), for the routes that choose what to
// answer by it: the export's format, and an event stream against the event whose id is `stream`.

export interface MediaRange {
  /** Lowercased: `application/json`, `text/*`, `*\/*`. */
  range: string;
  /** Its q weight: 1 when not given. */
  q: number;
}

/** The ranges `accept` takes, in the order written; a range with q = 0 (or a q that is no number) is left out. */
export function acceptedMediaRanges(accept: string | undefined): MediaRange[] {
  const accepted: MediaRange[] = [];
  for (const item of (accept ?? '').split(',')) {
    const [range = '', ...params] = item.split(';').map((part) => part.trim().toLowerCase());
    const qParam = params.find((param) => param.startsWith('q='));
    const q = qParam ? Number(qParam.slice(2)) : 1;
    if (range !== '' && Number.isFinite(q) && q > 0) accepted.push({ range, q });
  }
  return accepted;
}
