// A minimal HTTP client over one kept-alive connection, for sequential latency measurements: no
// connection setup is timed, and the client adds as little as node:http can.
import http from 'node:http';

export interface HttpAnswer {
  status: number;
  body: string;
}

export interface HttpClient {
  request(method: string, path: string, body?: unknown): Promise<HttpAnswer>;
  close(): void;
}

export function keepAliveClient(base: string, headers: Record<string, string>): HttpClient {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const { hostname, port } = new URL(base);
  const once = (method: string, path: string, payload: string | undefined) =>
    new Promise<HttpAnswer>((resolve, reject) => {
      const request = http.request(
        { agent, hostname, port, method, path, headers: payload === undefined ? headers : { ...headers, 'content-type': 'application/json' } },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          response.on('error', reject);
        },
      );
      request.on('error', reject);
      request.end(payload);
    });
  return {
    async request(method, path, body) {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      try {
        return await once(method, path, payload);
      } catch (error) {
        // The server closed the idle connection just as it was reused: once more, on a new one.
        if ((error as NodeJS.ErrnoException).code !== 'ECONNRESET') throw error;
        return once(method, path, payload);
      }
    },
    close: () => agent.destroy(),
  };
}
