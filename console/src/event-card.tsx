// One event of the timeline: seq, time, author, role; text rendered; function calls and responses
// collapsible; inline data by type and size; the event's state delta.
import type { SessionEvent } from './api.js';
import { JsonView } from './components.js';
import { base64Bytes, formatBytes, formatTime } from './format.js';

type Part = NonNullable<SessionEvent['content']>['parts'][number];

function PartView({ part }: { part: Part }) {
  const pieces = [];
  if (part.text !== undefined) pieces.push(<p class={part.thought ? 'text thought' : 'text'}>{part.thought ? <em>Thought: </em> : null}{part.text}</p>);
  if (part.functionCall) {
    pieces.push(
      <details class="call">
        <summary>
          Function call <code>{part.functionCall.name}</code>
          {part.functionCall.id ? <span class="muted"> · {part.functionCall.id}</span> : null}
        </summary>
        <JsonView value={part.functionCall.args ?? {}} label={`Arguments of ${part.functionCall.name}`} />
      </details>,
    );
  }
  if (part.functionResponse) {
    pieces.push(
      <details class="call">
        <summary>
          Function response <code>{part.functionResponse.name}</code>
          {part.functionResponse.id ? <span class="muted"> · {part.functionResponse.id}</span> : null}
        </summary>
        <JsonView value={part.functionResponse.response ?? {}} label={`Response of ${part.functionResponse.name}`} />
      </details>,
    );
  }
  if (part.inlineData) {
    pieces.push(
      <p class="inline-data">
        Inline data: <code>{part.inlineData.mimeType}</code>, {formatBytes(base64Bytes(part.inlineData.data))}
      </p>,
    );
  }
  return <>{pieces}</>;
}

export function EventCard({ event, selected, onShowState }: { event: SessionEvent; selected: boolean; onShowState: (seq: number) => void }) {
  const delta = event.actions?.stateDelta;
  return (
    <li class={selected ? 'event selected' : 'event'} data-seq={event.seq} aria-label={`Event ${event.seq} by ${event.author}`}>
      <header>
        <span class="seq">#{event.seq}</span>
        <span class="author">{event.author}</span>
        {event.content?.role ? <span class="badge">{event.content.role}</span> : null}
        <time dateTime={event.timestamp}>{formatTime(event.timestamp)}</time>
      </header>
      {(event.content?.parts ?? []).map((part, index) => (
        <PartView key={index} part={part} />
      ))}
      {event.errorCode || event.errorMessage ? (
        <p class="error-inline">
          Error {event.errorCode ? <code>{event.errorCode}</code> : null} {event.errorMessage}
        </p>
      ) : null}
      {delta && Object.keys(delta).length > 0 ? (
        <details class="delta">
          <summary>
            State delta{event.actions?.stateDeltaMode === 'replace' ? ' (replace)' : ''}: {Object.keys(delta).join(', ')}
          </summary>
          <JsonView value={delta} label={`State delta of event ${event.seq}`} />
        </details>
      ) : null}
      <button type="button" class="secondary small" onClick={() => onShowState(event.seq)} aria-pressed={selected}>
        State after event {event.seq}
      </button>
    </li>
  );
}
