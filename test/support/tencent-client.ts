// The official Tencent Cloud Node SDK (tencentcloud-sdk-nodejs-common) pointed at a test app
// listening on a loopback port, as README "Use the Tencent Cloud SDK" tells users to.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import * as tencentcloud from 'tencentcloud-sdk-nodejs-common';

export type Tc3Client = InstanceType<typeof tencentcloud.CommonClient>;

/** Listens on 127.0.0.1 (port chosen by the system); answers the `host:port` endpoint. */
export async function listenOnLoopback(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

export function sdkClient(endpoint: string, credential: { secretId: string; secretKey: string }): Tc3Client {
  return new tencentcloud.CommonClient(endpoint, '2025-09-20', {
    credential,
    region: 'ap-guangzhou',
    profile: { httpProfile: { endpoint, protocol: 'http://', reqTimeout: 30 } },
  });
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

