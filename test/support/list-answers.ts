// Reads list answers: over a real socket, checking how one was sent (src/http/view-serializer.ts,
// sendJsonPieces: a large one piece by piece in chunked transfer coding, a small one whole); and
// through the app, page after page.
import { expect } from 'vitest';
import { PIECEWISE_ANSWER_CHARS } from '../../src/http/view-serializer.js';
import type { TestApp } from './test-app.js';

/** Follows nextPageToken from the first page of `url` (which may carry a query) to the last: each page's `field` items. */
export async function followPages<Item>(t: Pick<TestApp, 'request'>, url: string, field: string): Promise<Item[][]> {
  const all: Item[][] = [];
  let token: string | undefined;
  do {
    const res = await t.request({ method: 'GET', url: token ? `${url}${url.includes('?') ? '&' : '?'}pageToken=${encodeURIComponent(token)}` : url });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as Record<string, unknown> & { nextPageToken?: string };
    all.push(body[field] as Item[]);
    token = body.nextPageToken;
  } while (token);
  return all;
}

/** GETs `url`, expects a JSON answer of more than PIECEWISE_ANSWER_CHARS sent in chunked transfer coding; its body parsed. */
export async function fetchPiecewiseAnswer<T>(url: string, headers: Record<string, string>): Promise<T> {
  const res = await fetch(url, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(res.headers.get('transfer-encoding')).toBe('chunked');
  expect(res.headers.get('content-length')).toBeNull();
  const text = await res.text();
  expect(text.length).toBeGreaterThan(PIECEWISE_ANSWER_CHARS);
  return JSON.parse(text) as T;
}

/** GETs `url`, expects an answer sent whole, with a Content-Length of its bytes; its body parsed. */
export async function fetchWholeAnswer<T>(url: string, headers: Record<string, string>): Promise<T> {
  const res = await fetch(url, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get('transfer-encoding')).toBeNull();
  const text = await res.text();
  expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(text));
  return JSON.parse(text) as T;
}
