// Small pieces every page uses: messages, the pager, JSON with highlighted changes.
import type { ComponentChildren } from 'preact';
import type { Failure, SessionSpace } from './api.js';
import type { Paged } from './paging.js';

export function ErrorMessage({ message }: { message: string | undefined }) {
  if (!message) return null;
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}

/**
 * A failed call: the service's message, its code and the request id (what a report to the
 * operator needs), and Retry when the failure was a load that can simply run again.
 */
export function FailureMessage({ failure, onRetry }: { failure: Failure | undefined; onRetry?: (() => void) | undefined }) {
  if (!failure) return null;
  return (
    <div class="error" role="alert">
      <p class="error-text">{failure.message}</p>
      <p class="error-facts">
        <span>
          Code <code data-testid="error-code">{failure.code}</code>
        </span>
        {failure.requestId ? (
          <span>
            Request id <code data-testid="request-id">{failure.requestId}</code>
          </span>
        ) : null}
      </p>
      {onRetry ? (
        <button type="button" class="secondary small" onClick={onRetry}>
          Retry
        </button>
      ) : null}
    </div>
  );
}

/**
 * A space in a breadcrumb: its name, with the id as the tooltip (ids are what logs and the API
 * speak of). The id stands in until the name arrives, or when the space cannot be described.
 */
export function SpaceName({ spaceId, space, href }: { spaceId: string; space: SessionSpace | undefined; href?: string }) {
  const name = space?.name ?? spaceId;
  return href ? (
    <a href={href} title={spaceId} data-testid="space-crumb">
      {name}
    </a>
  ) : (
    <span title={spaceId} data-testid="space-crumb">
      {name}
    </span>
  );
}

export function Pager<T>({ paged, label }: { paged: Paged<T>; label: string }) {
  return (
    <nav class="pager" aria-label={`${label} pages`}>
      <button type="button" onClick={paged.previous} disabled={paged.pageNumber <= 1 || paged.loading}>
        Previous page
      </button>
      <span aria-live="polite">Page {paged.pageNumber}</span>
      <button type="button" onClick={paged.next} disabled={!paged.hasNext || paged.loading}>
        Next page
      </button>
    </nav>
  );
}

export function Section({ title, children, id }: { title: string; children: ComponentChildren; id?: string }) {
  const headingId = `${id ?? title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-heading`;
  return (
    <section aria-labelledby={headingId} class="card">
      <h2 id={headingId}>{title}</h2>
      {children}
    </section>
  );
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * JSON as an indented tree; the values at the `highlighted` paths (keys joined by U+001F) are
 * marked, so the change one event made stands out in the whole state.
 */
export function JsonView({ value, highlighted, label }: { value: unknown; highlighted?: ReadonlySet<string>; label: string }) {
  return (
    <pre class="json" aria-label={label} tabIndex={0}>
      <JsonNode value={value as Json} path={[]} highlighted={highlighted ?? new Set()} indent="" />
    </pre>
  );
}

export const pathKey = (path: readonly string[]) => path.join('\u001f');

function JsonNode({ value, path, highlighted, indent }: { value: Json; path: string[]; highlighted: ReadonlySet<string>; indent: string }) {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || Object.keys(value).length === 0) {
    return <>{JSON.stringify(value)}</>;
  }
  const inner = `${indent}  `;
  const entries = Object.entries(value);
  return (
    <>
      {'{\n'}
      {entries.map(([key, child], index) => {
        const here = [...path, key];
        const line = (
          <>
            {inner}
            {JSON.stringify(key)}: <JsonNode value={child} path={here} highlighted={highlighted} indent={inner} />
            {index < entries.length - 1 ? ',' : ''}
          </>
        );
        return (
          <span key={key}>
            {highlighted.has(pathKey(here)) ? <mark class="changed" title="changed by this event">{line}</mark> : line}
            {'\n'}
          </span>
        );
      })}
      {indent}
      {'}'}
    </>
  );
}
