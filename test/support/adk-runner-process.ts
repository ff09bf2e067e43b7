// One "instance" of an ADK application, as a process of its own: a Runner on AdkSessionService
// that runs turns on one session. It prints `ready`, waits for `go` on stdin (so that several
// processes start at the same moment), creates the session unless another process did, runs ADK_LOOPS concurrent loops of ADK_TURNS turns
// each, and prints the ids of the events it appended as one JSON line.
//   node --import tsx test/support/adk-runner-process.ts   (env: ADK_BASE_URL, ADK_CREDENTIAL,
//   ADK_APP, ADK_USER, ADK_SESSION, ADK_TAG, ADK_LOOPS, ADK_TURNS)
import { createInterface } from 'node:readline';
import { Runner } from '@google/adk';
import { AdkSessionService } from '../../clients/typescript/src/adk.js';
import { ScriptedLlm, collect, scriptedAgent, userMessage } from './adk-agent.js';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const appName = env('ADK_APP');
const userId = env('ADK_USER');
const sessionId = env('ADK_SESSION');
const tag = env('ADK_TAG');
const loops = Number(env('ADK_LOOPS'));
const turns = Number(env('ADK_TURNS'));

const sessionService = new AdkSessionService({ baseUrl: env('ADK_BASE_URL'), credential: env('ADK_CREDENTIAL') });
const runner = new Runner({ appName, agent: scriptedAgent(new ScriptedLlm()), sessionService });

const lines = createInterface({ input: process.stdin });
const go = new Promise<void>((resolve) => lines.on('line', (line) => line.trim() === 'go' && resolve()));
process.stdout.write('ready\n');
await go;
lines.close();

// Every process makes sure the session exists, all at the same moment: the space of the appName
// and the session are created by whichever gets there first; the others find them.
await sessionService.createSession({ appName, userId, sessionId }).catch((error: unknown) => {
  if ((error as { code?: string }).code !== 'ResourceInUse.SessionExists') throw error;
});

const appended: { invocationId: string; eventIds: string[] }[] = [];
await Promise.all(
  Array.from({ length: loops }, async (_, loop) => {
    for (let turn = 0; turn < turns; turn++) {
      const events = await collect(runner.runAsync({ userId, sessionId, newMessage: userMessage(`remember ${tag}-${loop}-${turn}`) }));
      // The user's event is appended by the Runner and not yielded: the session has it.
      appended.push({ invocationId: events[0]!.invocationId, eventIds: events.map((event) => event.id) });
    }
  }),
);
process.stdout.write(`${JSON.stringify({ tag, appended })}\n`);
