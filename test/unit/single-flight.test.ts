import { describe, expect, it } from 'vitest';
import { createSingleFlight } from '../../src/lib/single-flight.js';

describe('createSingleFlight', () => {
  it('runs the work of a key once for the callers that arrive while it runs, and again after it settled', async () => {
    const flight = createSingleFlight();
    let runs = 0;
    let finish!: () => void;
    const work = () => new Promise<number>((resolve) => (runs++, (finish = () => resolve(runs))));
    const first = flight('a', work);
    const second = flight('a', work);
    const other = flight('b', async () => 'b');
    finish();
    expect(await Promise.all([first, second, other])).toEqual([1, 1, 'b']);
    const third = flight('a', work);
    finish();
    expect(await third).toBe(2);
  });

  it('lets the next caller run again after a failure', async () => {
    const flight = createSingleFlight();
    await expect(flight('a', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await flight('a', async () => 'ok')).toBe('ok');
  });
});
