import { describe, expect, it } from 'vitest';
import { type WindowEvent, selectContextWindow, serializedSize, truncateText } from '../../src/modules/context/context-window.js';

const text = (seq: number, body = `message ${seq}`): WindowEvent => ({ seq, author: 'user', content: { role: 'user', parts: [{ text: body }] } });
const call = (seq: number, name: string, id?: string): WindowEvent => ({
  seq,
  author: 'model',
  content: { role: 'model', parts: [{ functionCall: { ...(id ? { id } : {}), name, args: {} } }] },
});
const response = (seq: number, name: string, id?: string): WindowEvent => ({
  seq,
  author: 'tool',
  content: { role: 'user', parts: [{ functionResponse: { ...(id ? { id } : {}), name, response: { ok: true } } }] },
});
const seqs = (events: { seq: number }[]) => events.map((event) => event.seq);
const total = (events: unknown[]) => events.reduce<number>((sum, event) => sum + serializedSize(event), 0);
const LOTS = 1_000_000;

describe('selectContextWindow', () => {
  it('answers an empty window for no candidates', () => {
    expect(selectContextWindow([], { maxChars: 100, maxEvents: 10, windowStartSeq: 4 })).toEqual({ events: [], omittedEvents: 0, startSeq: 4, endSeq: 3 });
  });

  it('returns every candidate, oldest first, when all fit', () => {
    const events = [1, 2, 3].map((seq) => text(seq));
    const window = selectContextWindow(events, { maxChars: LOTS, maxEvents: 10 });
    expect(seqs(window.events)).toEqual([1, 2, 3]);
    expect(window).toMatchObject({ startSeq: 1, endSeq: 3, omittedEvents: 0 });
  });

  it('chooses from the newest backwards while the summed JSON size stays within maxChars', () => {
    const events = [1, 2, 3, 4, 5].map((seq) => text(seq));
    const size = serializedSize(events[0]);
    const window = selectContextWindow(events, { maxChars: size * 3 + size - 1, maxEvents: 10 });
    expect(seqs(window.events)).toEqual([3, 4, 5]);
    expect(total(window.events)).toBeLessThanOrEqual(size * 4 - 1);
    expect(window).toMatchObject({ startSeq: 3, endSeq: 5, omittedEvents: 2 });
  });

  it('includes an event whose size makes the sum exactly maxChars', () => {
    const events = [1, 2, 3].map((seq) => text(seq));
    const window = selectContextWindow(events, { maxChars: total(events.slice(1)), maxEvents: 10 });
    expect(seqs(window.events)).toEqual([2, 3]);
  });

  it('stops at maxEvents', () => {
    const events = [1, 2, 3, 4, 5].map((seq) => text(seq));
    const window = selectContextWindow(events, { maxChars: LOTS, maxEvents: 2 });
    expect(seqs(window.events)).toEqual([4, 5]);
    expect(window.omittedEvents).toBe(3);
  });

  it('stops at the first event that does not fit, even if an older smaller one would', () => {
    const events = [text(1), text(2, 'x'.repeat(500)), text(3)];
    const window = selectContextWindow(events, { maxChars: serializedSize(events[2]) * 2 + 10, maxEvents: 10 });
    expect(seqs(window.events)).toEqual([3]);
    expect(window.omittedEvents).toBe(2);
  });

  it('counts omittedEvents from windowStartSeq, including events that were never candidates', () => {
    const events = [98, 99, 100].map((seq) => text(seq));
    const window = selectContextWindow(events, { maxChars: LOTS, maxEvents: 2, windowStartSeq: 11 });
    expect(seqs(window.events)).toEqual([99, 100]);
    expect(window).toMatchObject({ startSeq: 99, endSeq: 100, omittedEvents: 88 });
  });

  it('keeps a function call with its response when both fit', () => {
    const events = [text(1), call(2, 'lookup', 'c1'), response(3, 'lookup', 'c1'), text(4)];
    const window = selectContextWindow(events, { maxChars: LOTS, maxEvents: 3 });
    expect(seqs(window.events)).toEqual([2, 3, 4]);
  });

  it('drops the response with its call when the pair would exceed maxEvents, and stops there', () => {
    const events = [text(1), call(2, 'lookup', 'c1'), response(3, 'lookup', 'c1'), text(4)];
    const window = selectContextWindow(events, { maxChars: LOTS, maxEvents: 2 });
    expect(seqs(window.events)).toEqual([4]);
    expect(window.omittedEvents).toBe(3);
  });

  it('drops the response with its call when the pair would exceed maxChars', () => {
    const events = [call(1, 'lookup', 'c1'), response(2, 'lookup', 'c1'), text(3)];
    const budget = serializedSize(events[2]) + serializedSize(events[1]) + 5; // room for the response, not the call
    const window = selectContextWindow(events, { maxChars: budget, maxEvents: 10 });
    expect(seqs(window.events)).toEqual([3]);
  });

  it('takes the events between a call and its response into the same unit', () => {
    const events = [text(1), call(2, 'search', 'a'), text(3, 'thinking'), response(4, 'search', 'a'), text(5)];
    expect(seqs(selectContextWindow(events, { maxChars: LOTS, maxEvents: 3 }).events)).toEqual([5]);
    expect(seqs(selectContextWindow(events, { maxChars: LOTS, maxEvents: 4 }).events)).toEqual([2, 3, 4, 5]);
  });

  it('matches parallel calls by id, and responses without id by the newest call of that name', () => {
    const parallel: WindowEvent = {
      seq: 2,
      content: { parts: [{ functionCall: { id: 'a', name: 'f' } }, { functionCall: { id: 'b', name: 'g' } }] },
    };
    const events = [text(1), parallel, response(3, 'f', 'a'), response(4, 'g', 'b'), call(5, 'h'), response(6, 'h')];
    expect(seqs(selectContextWindow(events, { maxChars: LOTS, maxEvents: 4 }).events)).toEqual([5, 6]);
    expect(seqs(selectContextWindow(events, { maxChars: LOTS, maxEvents: 5 }).events)).toEqual([2, 3, 4, 5, 6]);
  });

  it('does not pair a response whose call is outside the candidates with another call of the same name', () => {
    // Two parallel calls of one tool; the window can start at the second call, not at the first one's response.
    const events = [call(1, 'get_weather', 'A'), call(2, 'get_weather', 'B'), response(3, 'get_weather', 'A'), response(4, 'get_weather', 'B')];
    expect(seqs(selectContextWindow(events.slice(1), { maxChars: LOTS, maxEvents: 10, windowStartSeq: 2 }).events)).toEqual([4]);
    expect(seqs(selectContextWindow(events, { maxChars: LOTS, maxEvents: 3 }).events)).toEqual([4]);
    expect(seqs(selectContextWindow(events, { maxChars: LOTS, maxEvents: 4 }).events)).toEqual([1, 2, 3, 4]);
    // A response with an id still finds a call that was stored without one.
    expect(seqs(selectContextWindow([text(1), call(2, 'f'), response(3, 'f', 'x')], { maxChars: LOTS, maxEvents: 2 }).events)).toEqual([2, 3]);
  });

  it('stops at a response whose call is not among the candidates (before the window start)', () => {
    const events = [response(5, 'lookup', 'old'), text(6), text(7)];
    const window = selectContextWindow(events, { maxChars: LOTS, maxEvents: 10, windowStartSeq: 5 });
    expect(seqs(window.events)).toEqual([6, 7]);
    expect(window.omittedEvents).toBe(1);
  });

  it('always returns the newest event, even when it is half of a pair that does not fit', () => {
    const events = [call(1, 'lookup', 'c1'), response(2, 'lookup', 'c1')];
    const window = selectContextWindow(events, { maxChars: LOTS, maxEvents: 1 });
    expect(seqs(window.events)).toEqual([2]);
    expect(window.events[0]).not.toHaveProperty('truncated');
  });

  it('truncates the newest event from the front of its text when it alone is over budget, and flags it', () => {
    const long = `${'a'.repeat(1000)}THE END`;
    const events = [text(1), text(2, long)];
    const window = selectContextWindow(events, { maxChars: 200, maxEvents: 10 });
    expect(window.events).toHaveLength(1);
    const [only] = window.events;
    expect(only!.truncated).toBe(true);
    const kept = only!.content!.parts[0]!.text!;
    expect(long.endsWith(kept)).toBe(true);
    expect(kept.endsWith('THE END')).toBe(true);
    expect(serializedSize(only)).toBeLessThanOrEqual(200);
    expect(serializedSize(only)).toBeGreaterThan(190); // cut no more than needed
    expect(window).toMatchObject({ startSeq: 2, endSeq: 2, omittedEvents: 1 });
    expect(events[1]!.content!.parts[0]!.text).toBe(long); // the input is not modified
  });

  it('does not flag the newest event when it fits', () => {
    const window = selectContextWindow([text(1)], { maxChars: LOTS, maxEvents: 1 });
    expect(window.events[0]).toEqual(text(1));
  });
});

describe('truncateText', () => {
  it('trims the earliest text part first, keeping the last characters overall', () => {
    const event: WindowEvent = { seq: 1, content: { parts: [{ text: 'x'.repeat(300) }, { functionCall: { name: 'f' } }, { text: 'tail' }] } };
    const cut = truncateText(event, serializedSize({ ...event, truncated: true }) - 250);
    expect(cut.content!.parts.map((part) => part.text)).toEqual(['x'.repeat(50), undefined, 'tail']);
  });

  it('moves on to later parts when the first is used up', () => {
    const event: WindowEvent = { seq: 1, content: { parts: [{ text: 'abc' }, { text: 'defghij' }] } };
    const cut = truncateText(event, serializedSize({ ...event, truncated: true }) - 5);
    expect(cut.content!.parts.map((part) => part.text)).toEqual(['', 'fghij']);
  });

  it('copes with characters that JSON escapes and never splits a surrogate pair', () => {
    const event: WindowEvent = { seq: 1, content: { parts: [{ text: '"\n'.repeat(50) + '😀'.repeat(20) }] } };
    const maxChars = serializedSize({ seq: 1, content: { parts: [{ text: '' }] }, truncated: true }) + 21;
    const kept = truncateText(event, maxChars).content!.parts[0]!.text!;
    expect(serializedSize(truncateText(event, maxChars))).toBeLessThanOrEqual(maxChars);
    expect(kept).toBe('😀'.repeat(10));
  });

  it('answers the event with empty texts, still flagged, when even that is over budget', () => {
    const event: WindowEvent = { seq: 1, content: { parts: [{ text: 'hello' }, { functionCall: { name: 'f', args: { big: 'y'.repeat(500) } } }] } };
    const cut = truncateText(event, 50);
    expect(cut.truncated).toBe(true);
    expect(cut.content!.parts[0]!.text).toBe('');
  });
});
