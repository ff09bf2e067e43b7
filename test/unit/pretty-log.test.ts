// The readable log format: one line per record, from the same pino record as the JSON format, so
// redaction applies to both.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { formatPrettyLine, prettyStream } from '../../src/lib/logger.js';

function recorder(): { out: { write(text: string): void }; text(): string } {
  let text = '';
  return { out: { write: (chunk: string) => void (text += chunk) }, text: () => text };
}

describe('the pretty log format', () => {
  it('writes time, level and message, then the fields as key=value', () => {
    const time = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
    const line = JSON.stringify({ level: 30, time, pid: 1, hostname: 'h', requestId: 'r-1', statusCode: 200, route: '/v1/spaces', note: 'two words', msg: 'request completed' });
    expect(formatPrettyLine(line)).toBe('03:04:05.678 INFO  request completed requestId=r-1 statusCode=200 route=/v1/spaces note="two words"\n');
  });

  it('puts an error stack on indented lines below', () => {
    const line = JSON.stringify({ level: 50, time: 0, msg: 'request failed', err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at here' } });
    expect(formatPrettyLine(line)).toBe('00:00:00.000 ERROR request failed\n    Error: boom\n        at here\n');
  });

  it('redacts what the JSON format redacts', () => {
    const { out, text } = recorder();
    const logger = pino({ redact: ['req.headers.authorization'] }, prettyStream(out, { colors: false }));
    logger.info({ req: { headers: { authorization: 'Bearer AKIDsecret.key' } } }, 'with a header');
    expect(text()).toContain('with a header');
    expect(text()).toContain('[Redacted]');
    expect(text()).not.toContain('AKIDsecret');
  });
});
