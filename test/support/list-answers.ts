// Reads a list answer over a real socket and checks how it was sent (src/http/view-serializer.ts,
// sendJsonPieces): a large one piece by piece in chunked transfer coding, a small one whole.
import { expect } from 'vitest';
import { PIECEWISE_ANSWER_CHARS } from '../../src/http/view-serializer.js';

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
