// How a 400 names a place inside a JSON value, the way validation errors name fields.

/** `events[1].actions.stateDelta.big` from its keys and indexes; '' for the top. */
export function jsonPathName(path: (string | number)[]): string {
  let name = '';
  for (const key of path) name += typeof key === 'number' ? `[${key}]` : name ? `.${key}` : key;
  return name;
}
