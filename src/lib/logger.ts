// The service's pino logger: JSON lines for log collectors, or readable lines for a person at a
// terminal. Both come from the same pino record, after redaction, so a secret that is redacted in
// one format is redacted in the other.
import pino, { type Logger } from 'pino';
import type { Config } from '../config.js';

// Headers the request logger never writes anyway; redacted too in case an error object carries them.
const REDACTED_PATHS = ['req.headers.authorization', 'headers.authorization', 'err.config.headers.authorization'];

/** `format` auto: pretty when stdout is a terminal, JSON otherwise (a pipe, a file, a container's log driver). */
export function createLogger(options: { level: Config['logLevel']; format: Config['logFormat']; stdoutIsTerminal: boolean }): Logger {
  const pretty = options.format === 'pretty' || (options.format === 'auto' && options.stdoutIsTerminal);
  const settings = { level: options.level, redact: REDACTED_PATHS };
  return pretty ? pino(settings, prettyStream(process.stdout, { colors: options.stdoutIsTerminal })) : pino(settings);
}

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const LEVEL_COLORS: Record<number, string> = { 10: '90', 20: '36', 30: '32', 40: '33', 50: '31', 60: '35' };
// Fields every line has, shown in the line's head rather than after it.
const HEAD_FIELDS = new Set(['level', 'time', 'msg', 'pid', 'hostname']);

/**
 * A pino destination that writes each record as `12:34:56.789 INFO  message key=value …`: the
 * request id first when there is one, and an error's stack on the lines below.
 */
export function prettyStream(out: { write(text: string): unknown }, { colors }: { colors: boolean }): { write(line: string): void } {
  return {
    write(line: string) {
      out.write(formatPrettyLine(line, colors));
    },
  };
}

export function formatPrettyLine(line: string, colors = false): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const level = typeof record.level === 'number' ? record.level : 30;
  const time = typeof record.time === 'number' ? new Date(record.time).toISOString().slice(11, 23) : '';
  const name = (LEVEL_NAMES[level] ?? String(level)).padEnd(5);
  const paint = (code: string | undefined, text: string) => (colors && code ? `\u001b[${code}m${text}\u001b[39m` : text);
  const fields = Object.entries(record)
    .filter(([key, value]) => !HEAD_FIELDS.has(key) && key !== 'err' && value !== undefined)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? quoteIfNeeded(value) : JSON.stringify(value)}`);
  const head = [time, paint(LEVEL_COLORS[level], name), String(record.msg ?? ''), ...fields].filter(Boolean).join(' ');
  const stack = errorStack(record.err);
  return `${head}\n${stack ? `${stack.replace(/^/gm, '    ')}\n` : ''}`;
}

function quoteIfNeeded(value: string): string {
  return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
}

function errorStack(err: unknown): string | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const { stack, message } = err as { stack?: unknown; message?: unknown };
  if (typeof stack === 'string') return stack;
  return typeof message === 'string' ? message : undefined;
}
