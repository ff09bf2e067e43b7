// "State at event N": the session state right after one event, replayed by the server, with the
// values that event changed marked.
import { useEffect, useRef } from 'preact/hooks';
import type { AgentSessionClient } from './api.js';
import { FailureMessage, JsonView, pathKey } from './components.js';
import { useLoaded } from './paging.js';

export function StateAtPanel({ client, ids, seq, onClose }: { client: AgentSessionClient; ids: { spaceId: string; userId: string; sessionId: string }; seq: number; onClose: () => void }) {
  // Until the answer for this seq arrives, the previous one is not shown under the new heading.
  const replay = useLoaded(`${ids.spaceId}/${ids.userId}/${ids.sessionId}/${seq}`, () => client.getStateAtEvent({ ...ids, seq }));
  const result = replay.value;
  const heading = useRef<HTMLHeadingElement>(null);
  // Keyboard and screen-reader users land on the panel they opened.
  useEffect(() => {
    heading.current?.focus();
    heading.current?.scrollIntoView({ block: 'nearest' });
  }, [seq]);
  const highlighted = new Set((result?.changes ?? []).filter((change) => change.kind !== 'removed').map((change) => pathKey(change.path)));
  const shared = result ? { ...result.sharedDelta.user, ...result.sharedDelta.app } : {};
  return (
    <section class="card state-at" aria-labelledby="state-at-heading">
      <div class="row">
        <h2 id="state-at-heading" ref={heading} tabIndex={-1}>State after event {seq}</h2>
        <button type="button" class="secondary" onClick={onClose}>
          Close
        </button>
      </div>
      <FailureMessage failure={replay.failure} onRetry={replay.reload} />
      {result ? (
        <>
          {!result.initialStateKnown ? <p class="muted">This session's initial state is not known (imported, or older than this service version): the replay starts from {'{}'}.</p> : null}
          <h3>Changes made by event {seq}</h3>
          {result.changes.length === 0 ? (
            <p>This event changed nothing in the session state.</p>
          ) : (
            <ul class="changes" aria-label={`Changes made by event ${seq}`}>
              {result.changes.map((change) => (
                <li key={pathKey(change.path)} class={`change ${change.kind}`}>
                  <code>{change.path.join('.')}</code> {change.kind}
                  {change.kind !== 'added' ? <span> from <code>{JSON.stringify(change.before)}</code></span> : null}
                  {change.kind !== 'removed' ? <span> to <code>{JSON.stringify(change.after)}</code></span> : null}
                </li>
              ))}
            </ul>
          )}
          <h3>Session state</h3>
          <JsonView value={result.state} highlighted={highlighted} label={`Session state after event ${seq}`} />
          {Object.keys(shared).length > 0 ? (
            <>
              <h3>Written to the shared user: and app: states</h3>
              <JsonView value={shared} label={`Shared-state delta of event ${seq}`} />
            </>
          ) : null}
        </>
      ) : replay.failure ? null : (
        <p aria-live="polite">Replaying…</p>
      )}
    </section>
  );
}
