// A real ADK agent without a network: an LlmAgent whose model is a scripted BaseLlm and whose one
// function tool writes state. Shared by the Runner test and the Runner child processes.
import { BaseLlm, type BaseLlmConnection, FunctionTool, LlmAgent, type LlmRequest, type LlmResponse, type Event } from '@google/adk';
import { z } from 'zod';

type Content = LlmRequest['contents'][number];

/**
 * Answers by rule, so that any instance gives the same answer to the same history:
 *   the user says "remember <fact>"  → a call of the remember tool with that fact;
 *   the last content is a tool result → "Noted: <fact> (<n> facts)";
 *   anything else                     → "You said: <text>; I saw <n> contents".
 * Every request's contents and system instruction are recorded for the test to read.
 */
export class ScriptedLlm extends BaseLlm {
  readonly requests: { contents: Content[]; systemInstruction: string }[] = [];

  constructor() {
    super({ model: 'scripted-model' });
  }

  override async *generateContentAsync(request: LlmRequest): AsyncGenerator<LlmResponse, void> {
    this.requests.push({ contents: structuredClone(request.contents), systemInstruction: instructionText(request) });
    const last = request.contents.at(-1);
    const lastPart = last?.parts?.at(-1);
    const said = lastPart?.text ?? '';
    if (lastPart?.functionResponse) {
      const result = lastPart.functionResponse.response as { stored: string; count: number };
      yield { content: { role: 'model', parts: [{ text: `Noted: ${result.stored} (${result.count} facts)` }] }, turnComplete: true };
    } else if (said.startsWith('remember ')) {
      yield { content: { role: 'model', parts: [{ functionCall: { name: 'remember', args: { fact: said.slice('remember '.length) } } }] } };
    } else {
      yield { content: { role: 'model', parts: [{ text: `You said: ${said}; I saw ${request.contents.length} contents` }] }, turnComplete: true };
    }
  }

  override connect(): Promise<BaseLlmConnection> {
    return Promise.reject(new Error('the scripted model does not stream live'));
  }
}

function instructionText(request: LlmRequest): string {
  const instruction = request.config?.systemInstruction;
  if (typeof instruction === 'string') return instruction;
  const parts = (instruction as Content | undefined)?.parts ?? [];
  return parts.map((part) => part.text ?? '').join('');
}

/** Writes the fact three ways: a session list, a per-fact session key, and the user's last fact; plus a temp: key that must never be stored. */
export const rememberTool = new FunctionTool({
  name: 'remember',
  description: 'Remembers a fact about the user.',
  parameters: z.object({ fact: z.string() }),
  execute: ({ fact }, context) => {
    const state = context!.state;
    const facts = [...((state.get('facts') as string[] | undefined) ?? []), fact];
    state.set('facts', facts);
    state.set(`fact:${fact}`, true);
    state.set('user:lastFact', fact);
    state.set('temp:scratch', `working on ${fact}`);
    return { stored: fact, count: facts.length };
  },
});

export function scriptedAgent(model: ScriptedLlm): LlmAgent {
  return new LlmAgent({
    name: 'assistant',
    model,
    instruction: 'You remember facts. Known facts: {facts?}.',
    tools: [rememberTool],
  });
}

export const userMessage = (text: string): Content => ({ role: 'user', parts: [{ text }] });

export async function collect(events: AsyncIterable<Event>): Promise<Event[]> {
  const all: Event[] = [];
  for await (const event of events) all.push(event);
  return all;
}
