// How values are shown: times in UTC as the API writes them, sizes in bytes and KiB.
export const formatTime = (iso: string | null | undefined) => (iso ? iso.replace('T', ' ').replace(/\.\d{3}Z$/, 'Z') : '—');

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** The decoded size of base64 data. */
export function base64Bytes(data: string): number {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}

export const pretty = (value: unknown) => JSON.stringify(value, null, 2);

/** The metadata keys the service reserves (docs/design.md §4.5), shown with their own labels. */
export const RESERVED_METADATA: Record<string, string> = {
  'ags.tencentcloud.com/deployment-id': 'Deployment',
  'ags.tencentcloud.com/affinity-id': 'Affinity',
};

export function splitScopes(state: Record<string, unknown>): { session: Record<string, unknown>; user: Record<string, unknown>; app: Record<string, unknown> } {
  const parts = { session: {} as Record<string, unknown>, user: {} as Record<string, unknown>, app: {} as Record<string, unknown> };
  for (const [key, value] of Object.entries(state)) {
    if (key.startsWith('user:')) parts.user[key] = value;
    else if (key.startsWith('app:')) parts.app[key] = value;
    else parts.session[key] = value;
  }
  return parts;
}
