import { describe, expect, it } from 'vitest';
import { createSemaphore } from '../../src/lib/semaphore.js';

const deferred = () => {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
};
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('createSemaphore', () => {
  it('runs at most `slots` tasks at once and starts the waiting ones in arrival order', async () => {
    const gate = createSemaphore(2);
    const tasks = [deferred(), deferred(), deferred(), deferred()];
    const started: number[] = [];
    const results = tasks.map((d, i) => gate.run(async () => (started.push(i), await d.promise, i)));
    await tick();
    expect(started).toEqual([0, 1]);
    expect([gate.running, gate.waiting]).toEqual([2, 2]);
    tasks[1]!.resolve();
    await tick();
    expect(started).toEqual([0, 1, 2]);
    tasks[0]!.resolve();
    await tick();
    expect(started).toEqual([0, 1, 2, 3]);
    tasks[2]!.resolve();
    tasks[3]!.resolve();
    expect(await Promise.all(results)).toEqual([0, 1, 2, 3]);
    expect([gate.running, gate.waiting]).toEqual([0, 0]);
  });

  it('gives the slot back when a task fails', async () => {
    const gate = createSemaphore(1);
    await expect(gate.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await gate.run(async () => 'next')).toBe('next');
    expect(gate.running).toBe(0);
  });

  it('refuses fewer than one slot', () => {
    expect(() => createSemaphore(0)).toThrow();
  });
});
