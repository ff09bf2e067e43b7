// A real ADK Runner on AdkSessionService: an LlmAgent with a scripted model and a tool that writes
// state runs two turns on one Runner; then a brand-new Runner and service object (another
// instance) continues the same session, and its model gets the earlier turns and the tool's state.
// The same three turns on ADK's own InMemorySessionService are the reference for what the model sees.
import { InMemorySessionService, Runner, type BaseSessionService } from '@google/adk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdkSessionService } from '../../clients/typescript/src/adk.js';
import { ScriptedLlm, collect, scriptedAgent, userMessage } from '../support/adk-agent.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let baseUrl: string;
beforeAll(async () => {
  t = await createTestApp();
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => t?.close());

const TURNS = ['remember green is my colour', 'what do you know?', 'and after a restart?'];
const userId = 'runner-user';

/** Function-call ids are random per run (adk-<uuid>); the same position gets the same name. */
function normalizeCallIds<T>(value: T): T {
  const names = new Map<string, string>();
  return JSON.parse(JSON.stringify(value), (_key, item: unknown) =>
    typeof item === 'string' && item.startsWith('adk-') ? (names.get(item) ?? names.set(item, `call-${names.size + 1}`).get(item)) : item,
  ) as T;
}

async function runTurn(runner: Runner, sessionId: string, text: string) {
  return collect(runner.runAsync({ userId, sessionId, newMessage: userMessage(text) }));
}

describe('ADK Runner on AdkSessionService', () => {
  it('continues a session on a new Runner and service object: its model gets the earlier turns and the tool\'s state', async () => {
    const appName = `runner-app-${process.pid}`;
    const service = new AdkSessionService({ baseUrl, credential: t.account.rootCredential.token });
    const model = new ScriptedLlm();
    const runner = new Runner({ appName, agent: scriptedAgent(model), sessionService: service });
    const { id: sessionId } = await service.createSession({ appName, userId });

    const first = await runTurn(runner, sessionId, TURNS[0]!);
    expect(first.map((event) => event.content?.parts?.map((part) => Object.keys(part)[0]))).toEqual([['functionCall'], ['functionResponse'], ['text']]);
    expect(first.at(-1)?.content?.parts?.[0]?.text).toBe('Noted: green is my colour (1 facts)');
    await runTurn(runner, sessionId, TURNS[1]!);

    // Another instance: nothing shared with the first but the service.
    const restartedService = new AdkSessionService({ baseUrl, credential: t.account.rootCredential.token });
    const restartedModel = new ScriptedLlm();
    const restarted = new Runner({ appName, agent: scriptedAgent(restartedModel), sessionService: restartedService });
    const third = await runTurn(restarted, sessionId, TURNS[2]!);

    const seen = restartedModel.requests[0]!;
    expect(seen.contents.map((content) => [content.role, content.parts?.map((part) => part.text ?? Object.keys(part)[0])])).toEqual([
      ['user', ['remember green is my colour']],
      ['model', ['functionCall']],
      ['user', ['functionResponse']],
      ['model', ['Noted: green is my colour (1 facts)']],
      ['user', ['what do you know?']],
      ['model', ['You said: what do you know?; I saw 5 contents']],
      ['user', ['and after a restart?']],
    ]);
    expect(seen.contents[1]!.parts![0]!.functionCall).toMatchObject({ name: 'remember', args: { fact: 'green is my colour' } });
    expect(seen.contents[2]!.parts![0]!.functionResponse).toMatchObject({ name: 'remember', response: { stored: 'green is my colour', count: 1 } });
    expect(seen.contents[2]!.parts![0]!.functionResponse!.id).toBe(seen.contents[1]!.parts![0]!.functionCall!.id);
    // The state the tool wrote reached the new instance's agent: its instruction shows it.
    expect(seen.systemInstruction).toContain('Known facts: ["green is my colour"]');
    expect(third.at(-1)?.content?.parts?.[0]?.text).toBe('You said: and after a restart?; I saw 7 contents');

    const stored = await restartedService.getSession({ appName, userId, sessionId });
    expect(stored?.state).toEqual({ facts: ['green is my colour'], 'fact:green is my colour': true, 'user:lastFact': 'green is my colour' });
    expect(stored?.events.map((event) => event.author)).toEqual(['user', 'assistant', 'assistant', 'assistant', 'user', 'assistant', 'user', 'assistant']);
    const rows = await t.db.selectFrom('events').select(['seq']).where('account_id', '=', t.account.accountId).where('session_id', '=', sessionId).orderBy('seq').execute();
    expect(rows.map((row) => row.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);

    // What ADK's own InMemorySessionService shows the model for the same turns on one Runner.
    const reference = await referenceRequests(new InMemorySessionService(), `${appName}-reference`);
    const continued = [...model.requests, ...restartedModel.requests];
    expect(normalizeCallIds(continued)).toEqual(normalizeCallIds(reference));
  });
});

async function referenceRequests(sessionService: BaseSessionService, appName: string) {
  const model = new ScriptedLlm();
  const runner = new Runner({ appName, agent: scriptedAgent(model), sessionService });
  const { id } = await sessionService.createSession({ appName, userId });
  for (const text of TURNS) await runTurn(runner, id, text);
  return model.requests;
}
