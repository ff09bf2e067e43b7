import { describe, expect, it } from 'vitest';
import { listAnswerPieces } from '../../src/lib/list-answer-pieces.js';

describe('listAnswerPieces', () => {
  it('joins to the list answer JSON.stringify would write, with items already JSON text', () => {
    const items = [{ a: 1 }, { b: 'é"\\' }, { c: [null] }];
    const texts = items.map((item) => JSON.stringify(item));
    expect(JSON.parse(listAnswerPieces('events', texts, {}).join(''))).toEqual({ events: items });
    expect(listAnswerPieces('sessions', texts, { nextPageToken: 'a"b', totalCount: 7 }).join('')).toBe(JSON.stringify({ sessions: items, nextPageToken: 'a"b', totalCount: 7 }));
    expect(listAnswerPieces('events', [], { totalCount: 0 }).join('')).toBe('{"events":[],"totalCount":0}');
  });

  it('keeps one piece per item, so that a large answer can be written item by item', () => {
    expect(listAnswerPieces('events', ['{}', '{}', '{}'], {})).toEqual(['{"events":[', '{}', ',{}', ',{}', ']}']);
  });
});
