// The TypeScript client's writes whose answer is lost after the server acted, against the real
// server: the request arrives and is applied, and the client's fetch then fails as a reset
// connection does. A conditional write is not resent (a resend would be refused with 412 although
// the write happened), so the caller gets ClientError.Network; a DELETE that is resent and then
// answers 404 for what it deletes has succeeded. A refused connection sent nothing: anything is resent.
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSessionClient, AgentSessionError } from '../../clients/typescript/src/index.js';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let baseUrl: string;
beforeAll(async () => {
  t = await createTestApp();
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => t?.close());

type Fault = 'lose-answer' | 'refuse-connection';

/**
 * A client whose first request meets `fault`: 'lose-answer' lets it reach the server and drops the
 * answer (the write is applied), 'refuse-connection' sends it to a port nobody listens on.
 */
async function faultyClient(fault: Fault) {
  const closedPort = await freePort();
  let requests = 0;
  const fetch: typeof globalThis.fetch = async (input, init) => {
    requests += 1;
    if (requests > 1) return globalThis.fetch(input, init);
    if (fault === 'refuse-connection') return globalThis.fetch(String(input).replace(baseUrl, `http://127.0.0.1:${closedPort}`), init);
    const response = await globalThis.fetch(input, init);
    await response.body?.cancel();
    throw new TypeError('fetch failed');
  };
  const client = new AgentSessionClient({ baseUrl, credential: t.account.rootCredential.token, fetch, sleep: async () => {} });
  return { client, requests: () => requests };
}
async function freePort(): Promise<number> {
  const probe = net.createServer();
  const free = await new Promise<number>((resolve) => probe.listen(0, '127.0.0.1', () => resolve((probe.address() as AddressInfo).port)));
  await new Promise((resolve) => probe.close(resolve));
  return free;
}
const direct = () => new AgentSessionClient({ baseUrl, credential: t.account.rootCredential.token });
let userCounter = 0;
async function newSession() {
  const where = { spaceId: t.account.defaultSpaceId, userId: `lost-${++userCounter}` };
  const created = await direct().createSession(where, { title: 'old' });
  return { where: { ...where, sessionId: created.sessionId }, etag: created.etag, revision: created.revision };
}
async function sessionRows(sessionId: string) {
  const rows = await t.db.selectFrom('sessions').select(['title', 'memo', 'revision']).where('account_id', '=', t.account.accountId).where('session_id', '=', sessionId).execute();
  return rows.map((row) => ({ ...row, revision: Number(row.revision) })); // a bigint: a string from pg, a number from PGlite
}
const networkError = { code: 'ClientError.Network', status: 0, message: expect.stringContaining('fetch failed') };

describe('a conditional write whose answer was lost', () => {
  it('modifySession with If-Match: not resent, ClientError.Network, and the title written once', async () => {
    const { where, etag, revision } = await newSession();
    const { client, requests } = await faultyClient('lose-answer');
    const error = await client.modifySession(where, { title: 'new' }, { ifMatch: etag }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgentSessionError);
    expect(error).toMatchObject({ ...networkError, cause: expect.any(TypeError) });
    expect(requests()).toBe(1);
    expect(await sessionRows(where.sessionId)).toEqual([{ title: 'new', memo: null, revision: revision + 1 }]);
  });

  it('putContext with If-Match: not resent, ClientError.Network, and the memo written once', async () => {
    const { where, etag, revision } = await newSession();
    const { client, requests } = await faultyClient('lose-answer');
    await expect(client.putContext(where, { memo: { summary: 'kept' } }, { ifMatch: etag })).rejects.toMatchObject(networkError);
    expect(requests()).toBe(1);
    expect(await sessionRows(where.sessionId)).toEqual([{ title: 'old', memo: { summary: 'kept' }, revision: revision + 1 }]);
  });

  it('deleteSession with If-Match: not resent, ClientError.Network, and the session gone', async () => {
    const { where, etag } = await newSession();
    const { client, requests } = await faultyClient('lose-answer');
    await expect(client.deleteSession(where, { ifMatch: etag })).rejects.toMatchObject(networkError);
    expect(requests()).toBe(1);
    expect(await sessionRows(where.sessionId)).toEqual([]);
  });

  it('createSession with If-None-Match: * : not resent, ClientError.Network, and one session', async () => {
    const where = { spaceId: t.account.defaultSpaceId, userId: `lost-${++userCounter}` };
    const { client, requests } = await faultyClient('lose-answer');
    await expect(client.createSession(where, { sessionId: 'lost-create', title: 'made' }, { ifNoneMatch: '*' })).rejects.toMatchObject(networkError);
    expect(requests()).toBe(1);
    expect(await t.db.selectFrom('sessions').select(['title']).where('account_id', '=', t.account.accountId).where('user_id', '=', where.userId).execute()).toEqual([{ title: 'made' }]);
  });

  it('is resent after a refused connection, which sent nothing, and applies once', async () => {
    const { where, etag, revision } = await newSession();
    const { client, requests } = await faultyClient('refuse-connection');
    const modified = await client.modifySession(where, { title: 'new' }, { ifMatch: etag });
    expect(modified).toMatchObject({ title: 'new', revision: revision + 1 });
    expect(requests()).toBe(2);
    expect(await sessionRows(where.sessionId)).toEqual([{ title: 'new', memo: null, revision: revision + 1 }]);
  });
});

describe('what a second attempt cannot change is still resent after a lost answer', () => {
  it('an unconditional modifySession: resent, answered, written', async () => {
    const { where } = await newSession();
    const { client, requests } = await faultyClient('lose-answer');
    await expect(client.modifySession(where, { title: 'new' })).resolves.toMatchObject({ title: 'new' });
    expect(requests()).toBe(2);
  });

  it('an append with If-Match: resent as a replay, stored once', async () => {
    const { where, etag } = await newSession();
    const { client, requests } = await faultyClient('lose-answer');
    const answer = await client.appendEvents(where, { author: 'user', actions: { stateDelta: { n: 1 } } }, { ifMatch: etag });
    expect(requests()).toBe(2);
    const stored = await t.db.selectFrom('events').select(['event_id']).where('account_id', '=', t.account.accountId).where('session_id', '=', where.sessionId).execute();
    expect(stored).toEqual([{ event_id: answer.events[0]!.eventId }]);
  });
});

describe('a DELETE whose answer was lost', () => {
  const deletes = {
    deleteSession: async (client: AgentSessionClient) => {
      const { where } = await newSession();
      return { call: () => client.deleteSession(where), gone: async () => (await sessionRows(where.sessionId)).length === 0 };
    },
    deleteSessionSpace: async (client: AgentSessionClient) => {
      const { spaceId } = await direct().createSessionSpace({ name: `lost-space-${++userCounter}` });
      return { call: () => client.deleteSessionSpace({ spaceId }), gone: async () => (await t.db.selectFrom('session_spaces').select('space_id').where('space_id', '=', spaceId).execute()).length === 0 };
    },
    deleteSubAccount: async (client: AgentSessionClient) => {
      const { subAccountId } = await direct().createSubAccount({ name: 'lost' });
      return { call: () => client.deleteSubAccount({ subAccountId }), gone: async () => (await t.db.selectFrom('principals').select('principal_id').where('principal_id', '=', subAccountId).execute()).length === 0 };
    },
    deleteCredential: async (client: AgentSessionClient) => {
      const { subAccountId } = await direct().createSubAccount({ name: 'lost' });
      const { secretId } = await direct().createSubAccountCredential({ subAccountId });
      return { call: () => client.deleteCredential({ secretId }), gone: async () => (await t.db.selectFrom('credentials').select('secret_id').where('secret_id', '=', secretId).execute()).length === 0 };
    },
  };

  it.each(Object.keys(deletes) as (keyof typeof deletes)[])('%s: resent, and the resend\'s 404 for what it deletes is success', async (operation) => {
    const { client, requests } = await faultyClient('lose-answer');
    const { call, gone } = await deletes[operation](client);
    expect(await gone()).toBe(false);
    await expect(call()).resolves.toBeUndefined();
    expect(requests()).toBe(2);
    expect(await gone()).toBe(true);
  });

  it('is still not found when no answer was lost: on the first attempt, and after a refused connection', async () => {
    const where = { spaceId: t.account.defaultSpaceId, userId: 'lost-none', sessionId: 'never-created' };
    const before = await tableFingerprints(t.db);
    await expect(direct().deleteSession(where)).rejects.toMatchObject({ code: 'ResourceNotFound.Session', status: 404 });
    const { client, requests } = await faultyClient('refuse-connection');
    await expect(client.deleteSession(where)).rejects.toMatchObject({ code: 'ResourceNotFound.Session', status: 404 });
    expect(requests()).toBe(2);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it('is not found when the space it is in is not, even after a lost answer', async () => {
    const where = { spaceId: 'space-00000000-0000-4000-8000-000000000000', userId: 'lost-none', sessionId: 'never-created' };
    const { client, requests } = await faultyClient('lose-answer');
    await expect(client.deleteSession(where)).rejects.toMatchObject({ code: 'ResourceNotFound.SessionSpace', status: 404 });
    expect(requests()).toBe(2);
  });
});
