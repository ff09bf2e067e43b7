/// <reference lib="dom" />
// The console (/console) in a real Chromium against the real app on a socket: sign in, find a
// session by metadata, read its timeline, state at event N, live events appended by another client
// through another instance, export, delete with the confirmation (If-Match), a read-only
// credential's view, malformed and refused credentials, failed loads and Retry, the keyboard, a
// phone-sized window, and values as long as the API allows on a 1280×800 screen. A page error or
// an error answer a test does not expect fails the test.
import { readFile } from 'node:fs/promises';
import { sql } from 'kysely';
import type { Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { AgentSessionClient } from '../../clients/typescript/src/index.js';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { openDatabase } from '../../src/db/connect.js';
import { insertSubAccount, readOnlyOn } from '../support/principals.js';
import { TEST_PAGE_TOKEN_KEY, createTestApp, type TestApp } from '../support/test-app.js';
import { type ConsoleBrowser, DESKTOP, type ExpectedAnswer, PHONE, openBrowser, screenshot } from './console-browser.js';

let t: TestApp;
let origin: string;
let browser: ConsoleBrowser;
let spaceId: string;
let readOnlyToken: string;
const PNG_BYTES = 1024;

async function api(method: string, path: string, payload?: unknown, headers: Record<string, string> = {}) {
  const res = await t.request({ method: method as 'GET', url: `/v1${path}`, ...(payload === undefined ? {} : { payload: payload as object }), headers });
  if (res.statusCode >= 400) throw new Error(`${method} ${path}: ${res.statusCode} ${res.body}`);
  return res.statusCode === 204 ? undefined : res.json();
}

const sessionPath = (userId: string, sessionId: string) => `/spaces/${spaceId}/users/${userId}/sessions/${sessionId}`;

async function seed(): Promise<void> {
  spaceId = (await api('POST', '/spaces', { name: 'Support desk', description: 'Travel agent conversations' })).spaceId;
  await api('POST', `/spaces/${spaceId}/users/alice/sessions`, {
    sessionId: 'trip-42',
    title: 'Trip to Lisbon',
    metadata: { 'ags.tencentcloud.com/deployment-id': 'dep-7', 'ags.tencentcloud.com/affinity-id': 'aff-3', 'example.com/ticket': 'T-42' },
    state: { stage: 'new' },
  });
  await api('POST', `${sessionPath('alice', 'trip-42')}/events`, {
    events: [
      { author: 'user', content: { role: 'user', parts: [{ text: 'Book me a flight to Lisbon' }] }, actions: { stateDelta: { stage: 'asked' } } },
      { author: 'travel-agent', content: { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'search_flights', args: { to: 'LIS', seats: 1 } } }] } },
      {
        author: 'travel-agent',
        content: { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'search_flights', response: { flights: ['TP1', 'FR9'] } } }] },
        actions: { stateDelta: { 'user:tier': 'gold', flights: { count: 2 } } },
      },
      {
        author: 'travel-agent',
        content: { role: 'model', parts: [{ text: 'I found 2 flights.' }, { inlineData: { mimeType: 'image/png', data: Buffer.alloc(PNG_BYTES, 1).toString('base64') } }] },
        actions: { stateDelta: { stage: 'offered', offer: { price: 120 } } },
      },
    ],
  });
  await api('PUT', `${sessionPath('alice', 'trip-42')}/context`, { memo: { summary: 'Wants a cheap flight' } });
  await api('POST', `/spaces/${spaceId}/users/bob/sessions`, { sessionId: 'hotel-7', title: 'Hotel question', metadata: { 'example.com/ticket': 'T-7' } });
  // 25 sessions of one user: more than a page of the session list.
  for (let i = 0; i < 25; i++) await api('POST', `/spaces/${spaceId}/users/carol/sessions`, { sessionId: `c-${i}`, title: `Carol ${i}` });
  readOnlyToken = (await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(spaceId) })).credential.token;
}

beforeAll(async () => {
  t = await createTestApp({ limits: { rateLimitMax: 0 } });
  origin = await t.app.listen({ port: 0, host: '127.0.0.1' });
  await seed();
  browser = await openBrowser();
});
afterEach(async () => {
  expect(await browser.endTest()).toEqual([]);
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

async function signedIn({ token = t.account.rootCredential.token, viewport, expectedAnswers }: { token?: string; viewport?: { width: number; height: number }; expectedAnswers?: ExpectedAnswer[] } = {}): Promise<Page> {
  const page = await browser.newPage({ ...(viewport ? { viewport } : {}), ...(expectedAnswers ? { expectedAnswers } : {}) });
  await page.goto(`${origin}/console/`);
  await page.getByLabel('Credential').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Spaces', level: 1 }).waitFor();
  return page;
}

async function openSession(page: Page, userId: string, sessionId: string): Promise<void> {
  await page.goto(`${origin}/console/#${sessionPath(userId, sessionId)}`);
  await page.getByRole('heading', { name: 'Timeline' }).waitFor();
  await page.locator('.event').first().waitFor();
}

/** Presses Tab (or Shift+Tab) until `target` has the focus, as a keyboard user would; fails when it never does. */
async function tabTo(page: Page, target: Locator, key: 'Tab' | 'Shift+Tab' = 'Tab', limit = 100): Promise<void> {
  await target.waitFor();
  for (let presses = 0; presses < limit; presses++) {
    if (await target.evaluate((element) => element === document.activeElement)) return;
    await page.keyboard.press(key);
  }
  throw new Error(`${limit} presses of ${key} never reached ${target}`);
}

describe('the console', () => {
  it('signs in with a credential kept in sessionStorage only, sent as a Bearer header, and signs out', async () => {
    const page = await browser.newPage();
    const authorizations = new Set<string>();
    const urls: string[] = [];
    page.on('request', (request) => {
      urls.push(request.url());
      const header = request.headers().authorization;
      if (request.url().includes('/v1/') && header) authorizations.add(header);
    });
    await page.goto(`${origin}/console`);
    await screenshot(page, 'sign-in');
    await page.getByLabel('Credential').fill(t.account.rootCredential.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Support desk' }).waitFor();
    await screenshot(page, 'spaces');

    expect([...authorizations]).toEqual([`Bearer ${t.account.rootCredential.token}`]);
    expect(urls.some((url) => url.includes(t.account.rootCredential.token))).toBe(false);
    const storage = await page.evaluate(() => ({ session: Object.values(sessionStorage), local: Object.keys(localStorage), cookie: document.cookie }));
    expect(storage).toEqual({ session: [t.account.rootCredential.token], local: [], cookie: '' });

    await page.reload();
    await page.getByRole('link', { name: 'Support desk' }).waitFor(); // still signed in in this tab

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Credential').waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.close();
  });

  it('answers a malformed credential about the pasted token without asking the service, and takes the token out of a pasted header line', async () => {
    const page = await browser.newPage();
    const asked: string[] = [];
    page.on('request', (request) => request.url().includes('/v1/') && asked.push(request.url()));
    await page.goto(`${origin}/console/`);
    await page.getByLabel('Credential').fill(t.account.rootCredential.token.replace('.', ''));
    await page.getByRole('button', { name: 'Sign in' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toBe(
      'This credential is malformed: expected <secretId>.<secretKey>, the token shown once when the credential was created. It has no "." between the secretId and the secretKey.',
    );
    expect(asked).toEqual([]);
    await screenshot(page, 'sign-in-malformed');

    // Copied from a curl command: the header line around the token is not the person's mistake.
    await page.getByLabel('Credential').fill(`Authorization: Bearer ${t.account.rootCredential.token}`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Support desk' }).waitFor();
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([t.account.rootCredential.token]);
  });

  it('answers a refused credential about the pasted token, with the service\'s code and request id', async () => {
    const wrong = `AKID${'x'.repeat(32)}.${'y'.repeat(43)}`;
    const page = await browser.newPage({ expectedAnswers: [{ status: 401, url: /\/v1\/spaces\?pageSize=1$/ }] });
    await page.goto(`${origin}/console/`);
    await page.getByLabel('Credential').fill(wrong);
    const [refused] = await Promise.all([page.waitForResponse((response) => response.url().includes('/v1/spaces')), page.getByRole('button', { name: 'Sign in' }).click()]);
    const envelope = (await refused.json()).error;
    expect([refused.status(), envelope.code]).toEqual([401, 'AuthFailure']);
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.locator('.error-text').textContent()).toBe(
      'This credential was refused: it is unknown, disabled, or its secretKey is wrong. Check that you pasted the whole token, or create a new credential.',
    );
    expect(await alert.getByTestId('error-code').textContent()).toBe('AuthFailure');
    expect(await alert.getByTestId('request-id').textContent()).toBe(refused.headers()['x-request-id']);
    expect(envelope.requestId).toBe(refused.headers()['x-request-id']);
    // The service's message to API clients speaks of a header the person never typed.
    expect(await alert.textContent()).not.toContain('Authorization');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await screenshot(page, 'sign-in-refused');
  });

  it('lists spaces by name and the users of a space with their session count and last activity', async () => {
    // Bob's only session last changed at a known time, apart from the others' (all seeded within
    // the same second or so): his row must show this one, not another user's or a creation time.
    const bobsLastActivity = '2026-01-02T03:04:05.678Z';
    await t.db.updateTable('sessions').set({ update_time: new Date(bobsLastActivity) }).where('space_id', '=', spaceId).where('user_id', '=', 'bob').execute();
    const carolsNewest = (await api('GET', `/spaces/${spaceId}/sessions?userId=carol&orderBy=updateTime&order=desc&pageSize=1`)).sessions[0].updateTime as string;
    const page = await signedIn();
    await page.getByLabel('Name contains').fill('Support');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 1);
    await page.getByRole('link', { name: 'Support desk' }).click();
    await page.getByRole('link', { name: 'Sessions of user carol' }).waitFor();
    const rows = await page.locator('section[aria-labelledby="users-heading"] tbody tr').evaluateAll((trs) =>
      Object.fromEntries(trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)).map(([user, count, last]) => [user, { count, last }])),
    );
    // As the console writes times: UTC to the second.
    const shown = (iso: string) => iso.replace('T', ' ').replace(/\.\d{3}Z$/, 'Z');
    expect(rows.bob).toEqual({ count: '1', last: '2026-01-02 03:04:05Z' });
    expect(rows.carol).toEqual({ count: '25', last: shown(carolsNewest) });
    expect(rows.alice?.count).toBe('1');
    await screenshot(page, 'space');
  });

  it('pages through a space\'s sessions and filters them by user and title', async () => {
    const page = await signedIn();
    await page.goto(`${origin}/console/#/spaces/${spaceId}?userId=carol&order=asc`);
    const sessions = page.locator('section[aria-labelledby="sessions-heading"] tbody tr');
    await page.waitForFunction(() => document.querySelectorAll('section[aria-labelledby="sessions-heading"] tbody tr').length === 20);
    expect(await sessions.first().textContent()).toContain('Carol 0');
    const sessionsSection = page.locator('section[aria-labelledby="sessions-heading"]');
    await sessionsSection.getByRole('button', { name: 'Next page' }).click();
    await page.waitForFunction(() => document.querySelectorAll('section[aria-labelledby="sessions-heading"] tbody tr').length === 5);
    expect(await sessionsSection.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await sessionsSection.getByRole('button', { name: 'Previous page' }).click();
    await page.waitForFunction(() => document.querySelectorAll('section[aria-labelledby="sessions-heading"] tbody tr').length === 20);

    await page.getByLabel('Title contains').fill('Carol 2');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    // Carol 2 and Carol 20–24.
    await page.waitForFunction(() => document.querySelectorAll('section[aria-labelledby="sessions-heading"] tbody tr').length === 6);
    await page.close();
  });

  it('finds a session by metadata and shows the ags.tencentcloud.com/ keys plainly', async () => {
    const page = await signedIn();
    await page.goto(`${origin}/console/#/spaces/${spaceId}`);
    await page.getByLabel('Metadata (key=value, one per line)').fill('example.com/ticket=T-42');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction(() => document.querySelectorAll('section[aria-labelledby="sessions-heading"] tbody tr').length === 1);
    const row = page.locator('section[aria-labelledby="sessions-heading"] tbody tr');
    expect(await row.textContent()).toContain('dep-7');
    expect(await row.textContent()).toContain('aff-3');
    await screenshot(page, 'sessions-by-metadata');
    await row.getByRole('link', { name: 'Trip to Lisbon' }).click();
    await page.getByRole('heading', { name: 'Trip to Lisbon', level: 1 }).waitFor();
    const facts = await page.locator('.facts').textContent();
    expect(facts).toContain('Deploymentdep-7 (ags.tencentcloud.com/deployment-id)');
    expect(facts).toContain('Affinityaff-3 (ags.tencentcloud.com/affinity-id)');
    await page.close();
  });

  it('keeps what is typed into the filters at once, before the page\'s first effects have run', async () => {
    const page = await signedIn();
    // Preact runs effects after the next frame, or 100 ms after the render when no frame comes. With
    // frames stopped the window is wide enough to type into every time: the form's first effect
    // once set the filters back to the URL's (empty) ones, and a quick typist's text was lost.
    await page.evaluate(() => {
      window.requestAnimationFrame = () => 0;
    });
    await page.evaluate((hash) => {
      location.hash = hash;
    }, `#/spaces/${spaceId}`);
    const field = page.getByLabel('Metadata (key=value, one per line)');
    await field.fill('example.com/ticket=T-42');
    await page.waitForTimeout(300);
    expect(await field.inputValue()).toBe('example.com/ticket=T-42');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction(() => document.querySelectorAll('section[aria-labelledby="sessions-heading"] tbody tr').length === 1, undefined, { polling: 50 });
    expect(await page.locator('section[aria-labelledby="sessions-heading"] tbody tr').textContent()).toContain('Trip to Lisbon');
    // The form still follows the URL when its filters change while it is shown (a link, an edited address).
    await page.evaluate((hash) => {
      location.hash = hash;
    }, `#/spaces/${spaceId}?${new URLSearchParams({ metadata: 'example.com/ticket=T-7' })}`);
    await page.waitForFunction(() => (document.getElementById('filter-metadata') as HTMLTextAreaElement | null)?.value === 'example.com/ticket=T-7', undefined, { polling: 50 });
    await page.waitForFunction(() => document.querySelector('section[aria-labelledby="sessions-heading"] tbody tr')?.textContent?.includes('Hotel question'), undefined, { polling: 50 });
    await page.close();
  });

  it('reads the timeline: text, collapsible function calls and responses, inline data by type and size, deltas; state by scope, memo and window', async () => {
    const page = await signedIn();
    await openSession(page, 'alice', 'trip-42');
    await screenshot(page, 'session');
    const events = page.locator('.event');
    expect(await events.count()).toBe(4);
    expect(await events.nth(0).textContent()).toContain('Book me a flight to Lisbon');
    expect(await events.nth(0).locator('header').textContent()).toMatch(/^#1user\s*user/);

    const call = events.nth(1).locator('details.call');
    expect(await call.getAttribute('open')).toBeNull();
    expect(await call.locator('summary').textContent()).toContain('Function call search_flights');
    expect(await call.locator('pre').isVisible()).toBe(false);
    await call.locator('summary').click();
    expect(JSON.parse((await call.locator('pre').textContent())!)).toEqual({ to: 'LIS', seats: 1 });
    expect(await events.nth(2).locator('details.call summary').textContent()).toContain('Function response search_flights');

    expect(await events.nth(3).locator('.inline-data').textContent()).toBe('Inline data: image/png, 1.0 KiB');
    expect(await events.nth(3).locator('details.delta summary').textContent()).toBe('State delta: offer, stage'); // as jsonb orders keys

    expect(await page.getByTestId('revision').textContent()).toBe(String((await api('GET', sessionPath('alice', 'trip-42'))).revision));
    expect(JSON.parse((await page.getByLabel('User-scoped state').textContent())!)).toEqual({ 'user:tier': 'gold' });
    expect(JSON.parse((await page.getByLabel('Session-scoped state').textContent())!)).toEqual({ stage: 'offered', flights: { count: 2 }, offer: { price: 120 } });
    expect(JSON.parse((await page.getByLabel('Memo').textContent())!)).toEqual({ summary: 'Wants a cheap flight' });
    expect(await page.getByTestId('window-start').textContent()).toBe('1');
    await page.close();
  });

  it('filters the timeline by author', async () => {
    const page = await signedIn();
    await openSession(page, 'alice', 'trip-42');
    await page.getByLabel('Author').fill('user');
    await page.getByRole('button', { name: 'Filter events' }).click();
    await page.waitForFunction(() => document.querySelectorAll('.event').length === 1);
    expect(await page.locator('.event .author').textContent()).toBe('user');
    await page.close();
  });

  it('shows the state right after event N, as the server replays it, with the change highlighted', async () => {
    const page = await signedIn();
    await openSession(page, 'alice', 'trip-42');
    await page.getByRole('button', { name: 'State after event 3' }).click();
    const state = page.getByLabel('Session state after event 3');
    await state.waitFor();
    const expected = await api('GET', `${sessionPath('alice', 'trip-42')}/state-at/3`);
    expect(JSON.parse((await state.textContent())!)).toEqual(expected.state);
    expect(expected.state).toEqual({ stage: 'asked', flights: { count: 2 } });
    expect(await state.locator('mark.changed').allTextContents()).toEqual(['  "flights": {\n    "count": 2\n  }']);
    expect(await page.getByLabel('Changes made by event 3').textContent()).toBe('flights added to {"count":2}');
    expect(await page.getByLabel('Shared-state delta of event 3').textContent()).toContain('"user:tier": "gold"');
    await screenshot(page, 'state-at-event');

    await page.getByRole('button', { name: 'State after event 4' }).click();
    await page.getByLabel('Session state after event 4').waitFor();
    expect(await page.getByLabel('Changes made by event 4').textContent()).toBe('stage changed from "asked" to "offered"offer added to {"price":120}');
    await page.close();
  });

  it('shows an event another client appends, live, without reloading', async () => {
    // Another instance of the service on the same database (with its own connections on
    // PostgreSQL; PGlite is one connection), written to by the project's own client over HTTP: an
    // agent on another server. Nothing reaches the console's instance but the database.
    const own = inject('testBackend').kind === 'postgres' ? await openDatabase({ kind: 'postgres', url: t.database.pool.options.connectionString!, poolMax: 2, statementTimeoutMs: 30_000, connectTimeoutMs: 10_000 }) : undefined;
    const instance = await buildApp({ db: own?.db ?? t.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0 } });
    try {
      const agent = new AgentSessionClient({ baseUrl: await instance.listen({ port: 0, host: '127.0.0.1' }), credential: t.account.rootCredential.token });
      const ids = { spaceId, userId: 'dora', sessionId: 'live-1' };
      await agent.createSession({ spaceId, userId: 'dora' }, { sessionId: 'live-1', title: 'Live one' });
      await agent.appendEvents(ids, { author: 'user', content: { parts: [{ text: 'first' }] } });
      const page = await signedIn();
      await openSession(page, 'dora', 'live-1');
      let navigations = 0;
      page.on('framenavigated', () => navigations++);
      await page.getByText('Live: 0 new events').waitFor();

      await agent.appendEvents(ids, { author: 'other-instance', content: { parts: [{ text: 'appended elsewhere' }] }, actions: { stateDelta: { turn: 2 } } });
      await page.locator('.event', { hasText: 'appended elsewhere' }).waitFor();
      await page.getByText('Live: 1 new event (latest #2)').waitFor();
      await page.waitForFunction(() => document.querySelector('[data-testid="event-count"]')?.textContent === '2');
      expect(JSON.parse((await page.getByLabel('Session-scoped state').textContent())!)).toEqual({ turn: 2 });
      expect(await page.locator('.event').count()).toBe(2);
      expect(navigations).toBe(0);
      await screenshot(page, 'session-live');
    } finally {
      await instance.close();
      await own?.close();
    }
  });

  it('exports the session as JSON and YAML downloads', async () => {
    const page = await signedIn();
    await openSession(page, 'alice', 'trip-42');
    const [json] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export JSON' }).click()]);
    expect(json.suggestedFilename()).toBe('trip-42.json');
    const document = JSON.parse(await readFile((await json.path())!, 'utf8'));
    expect(document).toEqual(await api('GET', `${sessionPath('alice', 'trip-42')}/export`));
    const [yaml] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export YAML' }).click()]);
    expect(yaml.suggestedFilename()).toBe('trip-42.yaml');
    const text = await readFile((await yaml.path())!, 'utf8');
    expect(text).toContain('format: agent-session/v1');
    expect(text).toContain('sessionId: trip-42');
    await page.close();
  });

  it('deletes a session only after the confirmation, with If-Match: a changed session is refused with the service\'s message', async () => {
    await api('POST', `/spaces/${spaceId}/users/erin/sessions`, { sessionId: 'doomed', title: 'Doomed' });
    await api('POST', `${sessionPath('erin', 'doomed')}/events`, { author: 'user', content: { parts: [{ text: 'bye' }] } });
    const page = await signedIn({ expectedAnswers: [{ status: 412, url: /\/sessions\/doomed$/ }] });
    await openSession(page, 'erin', 'doomed');

    await page.getByRole('button', { name: 'Delete session' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this session?' });
    await dialog.waitFor();
    await screenshot(page, 'delete-confirmation');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await dialog.isVisible()).toBe(false);
    expect((await api('GET', sessionPath('erin', 'doomed'))).sessionId).toBe('doomed');

    // Changed behind the page's back (no event, so no live refresh): If-Match refuses the delete.
    await api('PATCH', sessionPath('erin', 'doomed'), { title: 'Renamed elsewhere' });
    await page.getByRole('button', { name: 'Delete session' }).click();
    await dialog.getByRole('button', { name: 'Delete permanently' }).click();
    const refusal = dialog.getByRole('alert');
    await refusal.waitFor();
    expect(await refusal.getByTestId('error-code').textContent()).toBe('FailedOperation.PreconditionFailed');
    expect((await api('GET', sessionPath('erin', 'doomed'))).title).toBe('Renamed elsewhere');
    await dialog.getByRole('button', { name: 'Cancel' }).click();

    await page.reload();
    await page.locator('.event').first().waitFor();
    await page.getByRole('button', { name: 'Delete session' }).click();
    await dialog.getByRole('button', { name: 'Delete permanently' }).click();
    await page.getByRole('heading', { name: 'Session deleted' }).waitFor();
    const gone = await t.request({ method: 'GET', url: `/v1${sessionPath('erin', 'doomed')}` });
    expect([gone.statusCode, gone.json().error.code]).toEqual([404, 'ResourceNotFound.Session']);
    await page.close();
  });

  it('shows a read-only sub-account no delete or export, and the service\'s message when it is refused', async () => {
    const defaultSpace = t.account.defaultSpaceId;
    // Every load of the space it may not describe is refused.
    const page = await signedIn({ token: readOnlyToken, expectedAnswers: [{ status: 403, url: new RegExp(`/v1/spaces/${defaultSpace}(/|$|\\?)`) }] });
    // The list of spaces shows only the space it may describe (once it is drawn: the heading comes
    // before the list's answer, and reading the rows at once raced it).
    await page.locator('tbody tr').first().waitFor();
    expect(await page.locator('tbody tr').allTextContents()).toHaveLength(1);
    await openSession(page, 'alice', 'trip-42');
    await page.getByText('Read-only access').waitFor();
    expect(await page.getByRole('button', { name: 'Delete session' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Export JSON' }).count()).toBe(0);
    await screenshot(page, 'session-read-only');

    const expected = await t.request({ method: 'GET', url: `/v1/spaces/${defaultSpace}`, token: readOnlyToken });
    expect(expected.statusCode).toBe(403);
    await page.goto(`${origin}/console/#/spaces/${defaultSpace}`);
    const alert = page.getByRole('alert').first();
    await alert.waitFor();
    expect(await alert.locator('.error-text').textContent()).toBe(expected.json().error.message);
    expect(await alert.getByTestId('error-code').textContent()).toBe('UnauthorizedOperation');
    await page.close();
  });

  it('shows a failed load\'s message, code and request id, and Retry runs the load again', async () => {
    const page = await signedIn({ expectedAnswers: [{ status: 500, url: new RegExp(`/v1/spaces/${spaceId}/users\\?`) }] });
    const usersAnswer = () => page.waitForResponse((response) => response.url().includes(`/v1/spaces/${spaceId}/users?`));
    const alert = page.locator('section[aria-labelledby="users-heading"]').getByRole('alert');
    // A real failure of the server: a column the users' query reads (and no other load of the page)
    // is away, so the query fails (InternalError).
    await sql`ALTER TABLE space_users RENAME COLUMN session_count TO session_count_away`.execute(t.db);
    try {
      const [failed] = await Promise.all([usersAnswer(), page.goto(`${origin}/console/#/spaces/${spaceId}`)]);
      const envelope = (await failed.json()).error;
      expect([failed.status(), envelope.code]).toEqual([500, 'InternalError']);
      await alert.waitFor();
      expect(await alert.locator('.error-text').textContent()).toBe(envelope.message);
      expect(await alert.getByTestId('error-code').textContent()).toBe('InternalError');
      // The id the server logged the failure under (its X-Request-Id), for a report to an operator.
      expect(await alert.getByTestId('request-id').textContent()).toBe(failed.headers()['x-request-id']);
      expect(envelope.requestId).toBe(failed.headers()['x-request-id']);
      // Only the failed part: the sessions beside it loaded.
      await page.getByRole('link', { name: 'Carol 24' }).waitFor();
      await screenshot(page, 'failed-load');
    } finally {
      await sql`ALTER TABLE space_users RENAME COLUMN session_count_away TO session_count`.execute(t.db);
    }
    const [retried] = await Promise.all([usersAnswer(), alert.getByRole('button', { name: 'Retry' }).click()]);
    expect(retried.status()).toBe(200);
    await page.getByRole('link', { name: 'Sessions of user carol' }).waitFor();
    expect(await alert.count()).toBe(0);
    await screenshot(page, 'failed-load-retried');
  });

  it('names the space in the breadcrumb, with its id as the title', async () => {
    const page = await signedIn();
    await openSession(page, 'alice', 'trip-42');
    const crumbs = page.getByRole('navigation', { name: 'Breadcrumb' });
    await crumbs.getByRole('link', { name: 'Support desk' }).waitFor();
    expect(await crumbs.textContent()).toBe('Spaces / Support desk / alice / trip-42');
    expect(await crumbs.getByTestId('space-crumb').getAttribute('title')).toBe(spaceId);
    await screenshot(page, 'breadcrumb-session');

    await crumbs.getByRole('link', { name: 'Support desk' }).click();
    await page.getByRole('heading', { name: 'Support desk', level: 1 }).waitFor();
    expect(await crumbs.textContent()).toBe('Spaces / Support desk');
    expect(await crumbs.getByTestId('space-crumb').getAttribute('title')).toBe(spaceId);
  });

  it('keeps the timeline\'s date filters readable with the state-at panel open, wide or narrow', async () => {
    // The narrowest window that still shows the panel beside the timeline (the layout stacks at 900 px), and the others the tests use.
    for (const [name, viewport] of [['desktop', DESKTOP], ['narrow', { width: 960, height: 800 }], ['phone', PHONE]] as const) {
      const page = await signedIn({ viewport });
      await openSession(page, 'alice', 'trip-42');
      await page.getByRole('button', { name: 'State after event 3' }).click();
      await page.getByLabel('Session state after event 3').waitFor();
      // Each date input is at least as wide as Chromium draws it by itself (all of mm/dd/yyyy, hh:mm:ss AM).
      const squeezed = await page.evaluate(() =>
        ['events-after', 'events-before'].flatMap((id) => {
          const input = document.getElementById(id)!;
          const natural = input.cloneNode() as HTMLInputElement;
          natural.removeAttribute('id');
          natural.style.cssText = 'position: absolute; width: auto; visibility: hidden';
          input.parentElement!.append(natural);
          const needed = natural.getBoundingClientRect().width;
          natural.remove();
          const width = input.getBoundingClientRect().width;
          return width + 0.5 < needed ? [`${id}: ${width} px of the ${needed} px it needs`] : [];
        }),
      );
      expect(squeezed, name).toEqual([]);
      expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth), name).toBeLessThanOrEqual(0);
      await screenshot(page, `state-at-filters-${name}`);
      await page.close();
    }
  });

  it('works with the keyboard alone', async () => {
    const page = await browser.newPage();
    await page.goto(`${origin}/console/`);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('credential');
    await page.keyboard.type(t.account.rootCredential.token);
    await page.keyboard.press('Enter');

    // From the list of spaces to a session, by links reached with Tab and followed with Enter.
    await tabTo(page, page.getByRole('link', { name: 'Support desk' }));
    await page.keyboard.press('Enter');
    await tabTo(page, page.getByRole('link', { name: 'Sessions of user alice' }));
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelectorAll('section[aria-labelledby="sessions-heading"] tbody tr').length === 1);
    await tabTo(page, page.getByRole('link', { name: 'Trip to Lisbon' }));
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Trip to Lisbon', level: 1 }).waitFor();
    await page.locator('.event').first().waitFor();

    await tabTo(page, page.getByRole('button', { name: 'State after event 2' }));
    await page.keyboard.press('Enter');
    await page.getByLabel('Session state after event 2').waitFor();
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('state-at-heading');

    // A function call opens with the keyboard; it is above the panel that has the focus.
    const call = page.locator('.event').nth(1).locator('details.call');
    await tabTo(page, call.locator('summary'), 'Shift+Tab');
    await page.keyboard.press('Enter');
    expect(await call.getAttribute('open')).not.toBeNull();

    // The delete dialog takes the focus and closes on Escape.
    await tabTo(page, page.getByRole('button', { name: 'Delete session' }), 'Shift+Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    expect(await page.evaluate(() => document.activeElement?.closest('dialog') !== null)).toBe(true);
    await page.keyboard.press('Escape');
    expect(await page.getByRole('dialog').isVisible()).toBe(false);
  });

  it('labels every control', async () => {
    const page = await signedIn();
    const unlabelled = async () =>
      page.evaluate(() =>
        [...document.querySelectorAll('input, select, textarea, button')]
          .filter((element) => {
            const control = element as HTMLInputElement;
            const text = (control.labels?.[0]?.textContent ?? '') + (control.getAttribute('aria-label') ?? '') + (element.tagName === 'BUTTON' ? element.textContent : '');
            return text.trim() === '';
          })
          .map((element) => element.outerHTML),
      );
    await page.goto(`${origin}/console/#/spaces/${spaceId}`);
    await page.getByRole('link', { name: 'Sessions of user carol' }).waitFor();
    expect(await unlabelled()).toEqual([]);
    await openSession(page, 'alice', 'trip-42');
    await page.getByRole('button', { name: 'State after event 1' }).click();
    await page.getByLabel('Session state after event 1').waitFor();
    expect(await unlabelled()).toEqual([]);
    await page.close();
  });

  it('fits a phone-sized window without sideways scrolling', async () => {
    const page = await signedIn({ viewport: PHONE });
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await screenshot(page, 'phone-spaces');
    await page.goto(`${origin}/console/#/spaces/${spaceId}`);
    await page.getByRole('link', { name: 'Sessions of user carol' }).waitFor();
    expect(await overflow()).toBeLessThanOrEqual(0);
    await screenshot(page, 'phone-space');
    await openSession(page, 'alice', 'trip-42');
    await page.getByRole('button', { name: 'State after event 3' }).click();
    await page.getByLabel('Session state after event 3').waitFor();
    expect(await overflow()).toBeLessThanOrEqual(0);
    await screenshot(page, 'phone-session');
    await page.close();
  });

  it('fits a 1280×800 screen with the longest titles, names, ids and one-line JSON the API accepts', async () => {
    // Each value one word as long as the API allows (ids 128 characters, titles 256, metadata
    // values 1024 bytes), and JSON whose one line is far wider than the window.
    const long = (prefix: string, length: number) => prefix + 'W'.repeat(length - prefix.length);
    const name = long('wide-', 128);
    const userId = long('user-', 128);
    const sessionId = long('session-', 128);
    const title = long('title-', DEFAULT_LIMITS.titleChars);
    const metadataKey = `${'k'.repeat(63)}.${'k'.repeat(63)}.${'k'.repeat(57)}/${'n'.repeat(63)}`; // 249 bytes: a qualified name at its limits
    const wide = await api('POST', '/spaces', { name, description: long('description-', 512) });
    const path = `/spaces/${wide.spaceId}/users/${userId}/sessions/${sessionId}`;
    await api('POST', `/spaces/${wide.spaceId}/users/${userId}/sessions`, {
      sessionId,
      title,
      metadata: { 'ags.tencentcloud.com/deployment-id': long('dep-', 1024), 'ags.tencentcloud.com/affinity-id': long('aff-', 1024), [metadataKey]: long('value-', 1024) },
    });
    await api('POST', `${path}/events`, {
      events: [
        {
          eventId: long('event-', 128),
          author: long('agent-', 128),
          content: { role: long('role-', 128), parts: [{ functionCall: { id: long('call-', 128), name: long('tool-', 256), args: { query: 'q'.repeat(3000) } } }] },
          actions: { stateDelta: { [long('key-', 200)]: 'v'.repeat(3000), 'user:profile': { note: 'n'.repeat(3000) } } },
          errorCode: long('Error.', 128),
          errorMessage: long('message-', 2000),
        },
        { author: 'tool', content: { role: 'user', parts: [{ functionResponse: { id: long('call-', 128), name: long('tool-', 256), response: { rows: 'r'.repeat(3000) } } }] } },
      ],
    });

    const page = await signedIn({ viewport: DESKTOP });
    // What sticks out past the window's right edge: the outermost elements that do, and the
    // elements whose text runs out of their box (a heading, a cell); a JSON box's lines scroll
    // inside it and do not count. And the tables that scroll sideways instead of wrapping.
    const overflow = () =>
      page.evaluate(() => {
        const edge = document.documentElement.clientWidth + 0.5;
        const counted = (element: Element) => !element.parentElement?.closest('.json');
        const past = (box: Element | Range) => box.getBoundingClientRect().right > edge;
        const describe = (element: Element) => `${element.tagName.toLowerCase()}${[...element.classList].map((name) => `.${name}`).join('')}: ${element.textContent!.slice(0, 24)}`;
        const outside = [...document.querySelectorAll('body *')].filter((element) => counted(element) && past(element) && !past(element.parentElement!));
        const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        for (let text = texts.nextNode(); text; text = texts.nextNode()) {
          const box = text.parentElement!;
          const range = document.createRange();
          range.selectNodeContents(text);
          if (counted(box) && !box.matches('.json') && past(range) && !past(box) && !outside.includes(box)) outside.push(box);
        }
        return {
          pageWiderBy: Math.max(0, document.documentElement.scrollWidth - window.innerWidth),
          outside: outside.map(describe),
          scrollingTables: [...document.querySelectorAll('.table-wrap')].filter((wrap) => wrap.scrollWidth > wrap.clientWidth).map((wrap) => wrap.querySelector('caption')?.textContent ?? describe(wrap)),
        };
      });
    const fits = { pageWiderBy: 0, outside: [], scrollingTables: [] };

    await page.getByRole('link', { name }).waitFor();
    await screenshot(page, 'long-values-spaces');
    expect.soft(await overflow(), 'spaces').toEqual(fits);

    await page.getByRole('link', { name }).click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    await page.getByRole('link', { name: `Sessions of user ${userId}` }).waitFor();
    await page.getByRole('link', { name: title }).waitFor();
    await screenshot(page, 'long-values-space');
    expect.soft(await overflow(), 'space').toEqual(fits);

    await page.getByRole('link', { name: title }).click();
    await page.getByRole('heading', { name: title, level: 1 }).waitFor();
    await page.locator('.event').nth(1).waitFor();
    expect.soft(await overflow(), 'session').toEqual(fits);
    const summaries = page.locator('.event summary');
    expect(await summaries.count()).toBe(3); // the call, the state delta and the response
    for (const summary of await summaries.all()) await summary.click();
    expect(await page.locator('.event details[open] pre.json').count()).toBe(3);
    await screenshot(page, 'long-values-session');
    expect.soft(await overflow(), 'session with the details open').toEqual(fits);
    // The long line is there, in a box that scrolls.
    const args = page.locator('.event details.call pre.json').first();
    expect(await args.evaluate((pre) => pre.scrollWidth > pre.clientWidth && getComputedStyle(pre).overflowX === 'auto')).toBe(true);

    await page.getByRole('button', { name: 'State after event 1' }).click();
    await page.getByLabel('Session state after event 1').waitFor();
    await screenshot(page, 'long-values-state-at');
    expect.soft(await overflow(), 'session with the state-at panel').toEqual(fits);
  });
});
