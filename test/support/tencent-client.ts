// The official Tencent Cloud Node SDK (tencentcloud-sdk-nodejs-common) pointed at a test app
// listening on a loopback port, as README "Use the Tencent Cloud SDK" tells users to.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import * as tencentcloud from 'tencentcloud-sdk-nodejs-common';
import { sleep } from './service-process.js';

export type Tc3Client = InstanceType<typeof tencentcloud.CommonClient>;

/** Listens on 127.0.0.1 (port chosen by the system); answers the `host:port` endpoint. */
export async function listenOnLoopback(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/**
 * An SDK client. It is paced the way any client that repeats calls quickly must be: the SDK signs
 * the body, the host and a timestamp in whole seconds (not the action), and the service accepts a
 * signature once (docs/tencent-api.md), so a body already signed for this endpoint and SecretId in
 * the current second waits for the next one. `paced: false` is the bare SDK (the replay tests).
 */
export function sdkClient(endpoint: string, credential: { secretId: string; secretKey: string }, { paced = true } = {}): Tc3Client {
  const client = new tencentcloud.CommonClient(endpoint, '2025-09-20', {
    credential,
    region: 'ap-guangzhou',
    profile: { httpProfile: { endpoint, protocol: 'http://', reqTimeout: 30 } },
  });
  if (!paced) return client;
  const request = client.request.bind(client);
  client.request = async (action, params, ...rest) => {
    const second = reserveSigningSecond(`${endpoint} ${credential.secretId} ${JSON.stringify(params ?? {})}`);
    // The SDK reads the clock right after this resolves, so it signs within `second`.
    while (Date.now() < second * 1000) await sleep(second * 1000 - Date.now());
    return request(action, params, ...rest);
  };
  return client;
}

// Shared by every client of the test process: the same credential may sign through several.
const lastSigningSecond = new Map<string, number>();

/** The first second, now or later, in which `body` has not been signed yet; it is then taken. */
function reserveSigningSecond(body: string): number {
  const second = Math.max(Math.floor(Date.now() / 1000), (lastSigningSecond.get(body) ?? -1) + 1);
  lastSigningSecond.set(body, second);
  return second;
}

/** The SDK's error for a call that must fail: `code` is Response.Error.Code. */
export async function sdkError(call: Promise<unknown>): Promise<{ code: string; message: string; requestId: string }> {
  try {
    await call;
  } catch (error) {
    const { code, message, requestId } = error as { code: string; message: string; requestId: string };
    return { code, message, requestId };
  }
  throw new Error('the call succeeded but was expected to fail');
}

