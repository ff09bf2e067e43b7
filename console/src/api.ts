// The signed-in credential and the client built on it. The credential lives in sessionStorage only
// (gone when the tab closes), is sent as a Bearer header by the project's own client, and never
// appears in a URL.
import { AgentSessionClient, AgentSessionError, type components } from 'agent-session-client';

export type Session = components['schemas']['Session'];
export type SessionEvent = components['schemas']['Event'];
export type SessionSpace = components['schemas']['SessionSpace'];
export type SpaceUser = components['schemas']['SpaceUser'];
export type StateAtEvent = components['schemas']['StateAtEvent'];
export type JsonValue = components['schemas']['JsonValue'];
export type SessionAction = components['schemas']['SpacePermissions']['actions'][number];

const STORAGE_KEY = 'agent-session-console.credential';

export function storedCredential(): string | undefined {
  return sessionStorage.getItem(STORAGE_KEY) ?? undefined;
}

export function clientFor(credential: string): AgentSessionClient {
  // One retry at most: a person is waiting, and a refused action should show at once.
  return new AgentSessionClient({ baseUrl: location.origin, credential, retry: { maxRetries: 1 } });
}

/** Checks the credential with a call every principal may make, then keeps it. */
export async function signIn(credential: string): Promise<AgentSessionClient> {
  const client = clientFor(credential);
  await client.listSessionSpaces({ pageSize: 1 });
  sessionStorage.setItem(STORAGE_KEY, credential);
  return client;
}

export function signOut(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

/**
 * A failed call as the console shows it: the service's code and message, and the request id that
 * finds the request in the server log (the envelope's, which the client also sent as X-Request-Id).
 */
export interface Failure {
  code: string;
  message: string;
  requestId: string | undefined;
}

export function toFailure(error: unknown): Failure {
  if (error instanceof AgentSessionError) return { code: error.code, message: error.message, requestId: error.requestId };
  return { code: 'ClientError', message: error instanceof Error ? error.message : String(error), requestId: undefined };
}

export { AgentSessionClient, AgentSessionError };
