import { describe, expect, it } from 'vitest';
import { RAW_JSON_SLOT, jsonWithRawValue } from '../../src/http/view-serializer.js';

describe('jsonWithRawValue', () => {
  it('puts the JSON text where the slot is, as it is, and leaves the rest as JSON.stringify writes it', () => {
    const raw = '{"b": 2, "a": [1, 2.50, "$&$1"]}';
    const text = jsonWithRawValue({ x: 1, session: { state: RAW_JSON_SLOT, title: 't' } }, raw);
    expect(text).toBe(`{"x":1,"session":{"state":${raw},"title":"t"}}`);
    expect(JSON.parse(text)).toEqual({ x: 1, session: { state: { b: 2, a: [1, 2.5, '$&$1'] }, title: 't' } });
  });

  it('writes a value without the slot as it is', () => {
    expect(jsonWithRawValue({ session: { revision: 3 } }, '{"secret": 1}')).toBe('{"session":{"revision":3}}');
  });

  it('cannot be matched by a string a request may hold: the slot has a NUL character and a random part', () => {
    expect(RAW_JSON_SLOT.startsWith('\u0000raw-json-')).toBe(true);
    expect(RAW_JSON_SLOT.slice('\u0000raw-json-'.length)).toMatch(/^[A-Za-z0-9_-]{12}$/);
  });
});
