// Logs a database outage as two lines, not one error per refused request (issue 19: a 6-s restart
// of PostgreSQL gave 428 error lines with stacks). The error handler reports each request it answers
// 503 ResourceUnavailable.Database here. The first such answer starts probing the database: if the
// probe fails, the outage began (one warning) and the probe repeats until it succeeds (one info line
// with how many requests were refused and for how long). A 503 the probe does not confirm — a
// session locked past the statement timeout, say — was about that request alone and logs nothing
// above debug.
import type { FastifyBaseLogger } from 'fastify';

export interface DatabaseOutageOptions {
  /** Resolves when the database answers a turn's kind of statement. */
  probe: () => Promise<void>;
  logger: FastifyBaseLogger;
  probeIntervalMs?: number;
}

export interface DatabaseOutage {
  /** A request was answered 503 ResourceUnavailable.Database. */
  requestRefused(): void;
  close(): void;
}

export function trackDatabaseOutage({ probe, logger, probeIntervalMs = 1_000 }: DatabaseOutageOptions): DatabaseOutage {
  let refused = 0;
  let firstRefusedAt = 0;
  let outage = false;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;

  const stopProbing = () => {
    clearInterval(timer);
    timer = undefined;
    refused = 0;
    outage = false;
  };

  const check = async () => {
    if (probing) return;
    probing = true;
    try {
      await probe();
      if (outage) {
        logger.info({ refusedRequests: refused, outageMs: Date.now() - firstRefusedAt }, 'database available again');
      }
      stopProbing();
    } catch (error) {
      if (!outage) {
        outage = true;
        logger.warn({ reason: (error as Error).message }, 'database unavailable: requests are answered 503 until it is back');
      }
    } finally {
      probing = false;
    }
  };

  return {
    requestRefused() {
      refused++;
      if (timer) return;
      firstRefusedAt = Date.now();
      timer = setInterval(() => void check(), probeIntervalMs);
      timer.unref();
      void check();
    },
    close: stopProbing,
  };
}
