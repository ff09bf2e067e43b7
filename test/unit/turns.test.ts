import { describe, expect, it } from 'vitest';
import { runInTurns } from '../../src/lib/turns.js';

describe('runInTurns', () => {
  it('runs the first task now and each other one in a turn of its own, in order', () => {
    const turns: (() => void)[] = [];
    const ran: number[] = [];
    runInTurns([0, 1, 2].map((n) => () => void ran.push(n)), (callback) => void turns.push(callback));
    expect(ran).toEqual([0]);
    expect(turns).toHaveLength(1);
    turns.shift()!();
    expect(ran).toEqual([0, 1]);
    turns.shift()!();
    expect(ran).toEqual([0, 1, 2]);
    // Nothing is left to run: no turn more was asked for.
    expect(turns).toHaveLength(0);
  });

  it('goes on with the next task when one throws', () => {
    const turns: (() => void)[] = [];
    const ran: number[] = [];
    expect(() =>
      runInTurns(
        [
          () => {
            throw new Error('first');
          },
          () => void ran.push(1),
        ],
        (callback) => void turns.push(callback),
      ),
    ).toThrow('first');
    turns.shift()!();
    expect(ran).toEqual([1]);
  });

  it('asks for no turn with nothing or one task to run', () => {
    const turns: (() => void)[] = [];
    runInTurns([], (callback) => void turns.push(callback));
    runInTurns([() => undefined], (callback) => void turns.push(callback));
    expect(turns).toHaveLength(0);
  });
});
