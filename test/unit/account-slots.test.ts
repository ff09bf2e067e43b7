import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createAccountSlots } from '../../src/lib/account-slots.js';

const deferred = () => {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
};
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('createAccountSlots', () => {
  it('lets one account hold at most its share, so another account starts at once while the first one waits', async () => {
    const slots = createAccountSlots({ total: 4, perAccount: 2 });
    const started: string[] = [];
    const a = [deferred(), deferred(), deferred(), deferred()];
    const b = deferred();
    const results = a.map((d, i) => slots.run('A', async () => (started.push(`A${i}`), await d.promise)));
    await tick();
    expect(started).toEqual(['A0', 'A1']);
    const bResult = slots.run('B', async () => (started.push('B'), await b.promise));
    await tick();
    // B arrived after A2 and A3 but starts before them: A is at its share.
    expect(started).toEqual(['A0', 'A1', 'B']);
    expect([slots.running, slots.waiting]).toEqual([3, 2]);
    a[0]!.resolve();
    await tick();
    expect(started).toEqual(['A0', 'A1', 'B', 'A2']);
    b.resolve();
    a[1]!.resolve();
    a[2]!.resolve();
    await tick();
    expect(started).toEqual(['A0', 'A1', 'B', 'A2', 'A3']);
    a[3]!.resolve();
    await Promise.all([...results, bResult]);
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('holds the total across accounts, starting the waiters in arrival order, and gives a slot back when a task fails', async () => {
    const slots = createAccountSlots({ total: 2, perAccount: 2 });
    const started: string[] = [];
    const first = deferred();
    const second = deferred();
    const failing = slots.run('A', async () => (started.push('A'), await first.promise));
    const running = slots.run('B', async () => (started.push('B'), await second.promise));
    const later = ['C', 'D'].map((account) => slots.run(account, async () => void started.push(account)));
    await tick();
    expect(started).toEqual(['A', 'B']);
    first.reject(new Error('boom'));
    await expect(failing).rejects.toThrow('boom');
    await tick();
    expect(started).toEqual(['A', 'B', 'C', 'D']);
    second.resolve();
    await Promise.all([running, ...later]);
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('gives a freed slot to the waiting account that holds the fewest, whatever the order of arrival', async () => {
    const slots = createAccountSlots({ total: 3, perAccount: 3 });
    const started: string[] = [];
    const gates = new Map<string, ReturnType<typeof deferred>>();
    const start = (name: string, account: string) => {
      const gate = deferred();
      gates.set(name, gate);
      return slots.run(account, async () => (started.push(name), await gate.promise));
    };
    const all = [start('A0', 'A'), start('A1', 'A'), start('B0', 'B'), start('A2', 'A'), start('A3', 'A'), start('C0', 'C')];
    await tick();
    expect(started).toEqual(['A0', 'A1', 'B0']);
    // A holds 2, B 1, C none: C's waiter goes first though A2 and A3 came before it.
    gates.get('A0')!.resolve();
    await tick();
    expect(started).toEqual(['A0', 'A1', 'B0', 'C0']);
    gates.get('B0')!.resolve();
    await tick();
    expect(started).toEqual(['A0', 'A1', 'B0', 'C0', 'A2']);
    for (const name of ['A1', 'C0', 'A2']) gates.get(name)!.resolve();
    await tick();
    gates.get('A3')!.resolve();
    await Promise.all(all);
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('gives up a wait after its timeout with the given error, and never starts that waiter later', async () => {
    const slots = createAccountSlots({ total: 1, perAccount: 1 });
    const holding = await slots.acquire('A');
    const timedOut = slots.acquire('B', { timeoutMs: 20, timeoutError: () => new Error('no slot in time') });
    await expect(timedOut).rejects.toThrow('no slot in time');
    expect([slots.running, slots.waiting]).toEqual([1, 0]);
    const next = slots.acquire('C');
    holding();
    holding(); // a second call gives nothing back twice
    const giveBack = await next;
    expect([slots.running, slots.waiting]).toEqual([1, 0]);
    giveBack();
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('counts work of no account in the total but holds it to no share', async () => {
    const slots = createAccountSlots({ total: 3, perAccount: 1 });
    const held = await Promise.all([slots.acquire(undefined), slots.acquire(undefined)]);
    const a = await slots.acquire('A');
    expect([slots.running, slots.waiting]).toEqual([3, 0]);
    const waiting = slots.acquire(undefined);
    expect(slots.waiting).toBe(1);
    a();
    (await waiting)();
    held.forEach((giveBack) => giveBack());
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('refuses a share or a total below one', () => {
    expect(() => createAccountSlots({ total: 0, perAccount: 1 })).toThrow(/at least one slot/);
    expect(() => createAccountSlots({ total: 2, perAccount: 0 })).toThrow(/at least one slot/);
  });

  describe('with a time share', () => {
    // A clock the test moves: holding time is what the budget charges.
    const clock = () => {
      let ms = 0;
      return { now: () => ms, advance: (by: number) => (ms += by) };
    };
    // The wake-up of a waiting account is a timer: the tests move it with the clock.
    beforeEach(() => vi.useFakeTimers());
    afterEach(() => vi.useRealTimers());

    it('charges each holding its duration and makes an account whose budget is spent wait, with free slots, until it refills', async () => {
      const time = clock();
      const slots = createAccountSlots({ total: 4, perAccount: 4, timeShare: { perSecond: 0.5, burstSeconds: 1, maxChargeSeconds: 10, now: time.now } });
      const first = await slots.acquire('A');
      time.advance(1_500); // held 1.5 s: the 1 s burst and 0.5 s more
      first();
      // Budget: 1 − 1.5 = −0.5 s; at 0.5 s a second it is positive again after just over 1 s.
      let started = false;
      const second = slots.acquire('A').then((giveBack) => ((started = true), giveBack));
      await vi.advanceTimersByTimeAsync(0);
      expect([started, slots.running, slots.waiting]).toEqual([false, 0, 1]);
      // Another account is not held back by A's spent budget.
      (await slots.acquire('B'))();
      time.advance(900);
      await vi.advanceTimersByTimeAsync(900);
      expect(started).toBe(false);
      time.advance(200);
      await vi.advanceTimersByTimeAsync(200);
      expect(started).toBe(true);
      (await second)();
      expect([slots.running, slots.waiting]).toEqual([0, 0]);
    });

    it('charges one holding at most maxChargeSeconds, and refills no further than the burst', async () => {
      const time = clock();
      const slots = createAccountSlots({ total: 4, perAccount: 4, timeShare: { perSecond: 1, burstSeconds: 2, maxChargeSeconds: 0.5, now: time.now } });
      const long = await slots.acquire('A');
      time.advance(60_000); // an export to a slow reader: charged 0.5 s, not 60
      long();
      const next = await slots.acquire('A'); // 1.5 s left: starts at once
      next();
      time.advance(3_600_000); // an hour idle refills to the burst, 2 s, not more
      // Four holdings of 0.5 s at once spend the 2 s exactly.
      const four = await Promise.all([1, 2, 3, 4].map(() => slots.acquire('A')));
      time.advance(500);
      four.forEach((giveBack) => giveBack());
      let started = false;
      void slots.acquire('A').then((giveBack) => ((started = true), giveBack()));
      await vi.advanceTimersByTimeAsync(0);
      expect(started).toBe(false);
      time.advance(10);
      await vi.advanceTimersByTimeAsync(10);
      expect(started).toBe(true);
    });

    it('charges extra work beyond the holding, at most maxChargeSeconds, and the account waits for it as for a holding', async () => {
      const time = clock();
      const slots = createAccountSlots({ total: 4, perAccount: 4, timeShare: { perSecond: 1, burstSeconds: 1, maxChargeSeconds: 1.5, now: time.now } });
      slots.chargeExtra('A', 5); // capped: 1 − 1.5 = −0.5 s
      slots.chargeExtra('B', 0); // nothing
      slots.chargeExtra('B', Number.NaN); // nothing
      let started = false;
      const waiting = slots.acquire('A').then((giveBack) => ((started = true), giveBack));
      (await slots.acquire('B'))();
      await vi.advanceTimersByTimeAsync(0);
      expect([started, slots.waiting]).toEqual([false, 1]);
      time.advance(600);
      await vi.advanceTimersByTimeAsync(600);
      expect(started).toBe(true);
      (await waiting)();
    });

    it('refuses a time share that is not positive', () => {
      expect(() => createAccountSlots({ total: 1, perAccount: 1, timeShare: { perSecond: 0, burstSeconds: 1, maxChargeSeconds: 1 } })).toThrow(/positive/);
    });
  });
});
