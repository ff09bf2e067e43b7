// Chooses the events an agent gets for its next turn (docs/design.md §4.7). Pure: no I/O, so every rule has a
// unit test. The caller passes the newest candidate events (oldest first, gap-free seqs) and the
// session's windowStartSeq; the answer is a contiguous run ending at the newest event.

/** The parts of an event the selection looks at; everything else is carried through unchanged. */
export interface WindowPart {
  text?: string;
  functionCall?: { id?: string; name: string; [field: string]: unknown };
  functionResponse?: { id?: string; name: string; [field: string]: unknown };
  [field: string]: unknown;
}

export interface WindowEvent {
  seq: number;
  content?: { parts: WindowPart[]; [field: string]: unknown };
  [field: string]: unknown;
}

export interface WindowBudget {
  /** Upper bound of the summed JSON.stringify length of the chosen events. */
  maxChars: number;
  maxEvents: number;
  /** The session's window start; omittedEvents counts from here. Default: the first candidate's seq. */
  windowStartSeq?: number;
}

export interface ContextWindow<E extends WindowEvent> {
  events: (E & { truncated?: true })[];
  /** Events with seq in [windowStartSeq, endSeq] that are not returned. */
  omittedEvents: number;
  /** First and last returned seq; an empty window has startSeq = windowStartSeq, endSeq = startSeq - 1. */
  startSeq: number;
  endSeq: number;
}

const UNRESOLVED = -1;

export const serializedSize = (event: unknown): number => JSON.stringify(event).length;

/** `sizes[i]` is serializedSize(candidates[i]), when the caller has measured them already. */
export function selectContextWindow<E extends WindowEvent>(
  candidates: readonly E[],
  budget: WindowBudget,
  sizes: readonly number[] = candidates.map(serializedSize),
): ContextWindow<E> {
  const range = selectWindowRange(candidates, budget, sizes);
  const newest = candidates.at(-1);
  const events: (E & { truncated?: true })[] = !newest
    ? []
    : range.truncateNewest
      ? [truncateText(newest, budget.maxChars)]
      : candidates.slice(range.from);
  return { events, omittedEvents: range.omittedEvents, startSeq: range.startSeq, endSeq: range.endSeq };
}

/** The window as positions in the candidates, for callers that hold the events as JSON text (the context read). */
export interface WindowRange {
  /** The window is candidates[from..]. */
  from: number;
  /** The window is the newest event alone, over budget: it must go through truncateText. */
  truncateNewest: boolean;
  omittedEvents: number;
  startSeq: number;
  endSeq: number;
}

/**
 * selectContextWindow without building the answer: it reads only each candidate's seq and its
 * function calls and responses (their id and name), and the sizes, which are required here.
 */
export function selectWindowRange(candidates: readonly WindowEvent[], budget: WindowBudget, sizes: readonly number[]): WindowRange {
  const windowStartSeq = budget.windowStartSeq ?? candidates[0]?.seq ?? 1;
  const newest = candidates.at(-1);
  if (!newest) return { from: 0, truncateNewest: false, omittedEvents: 0, startSeq: windowStartSeq, endSeq: windowStartSeq - 1 };

  const partnerOf = earliestCallIndexes(candidates);
  let chars = 0;
  let from = candidates.length; // the chosen run is candidates[from..]
  // Walk back one unit at a time: an event whose responses answer older calls drags those calls
  // (and everything between, so the run stays contiguous) into its unit.
  while (from > 0) {
    let low = from - 1;
    let unitChars = 0;
    let complete = true;
    for (let index = from - 1; index >= low; index--) {
      const partner = partnerOf[index] ?? index;
      if (partner === UNRESOLVED) {
        complete = false; // its call is not among the candidates: outside the window or the budget
        break;
      }
      low = Math.min(low, partner);
      unitChars += sizes[index] ?? 0;
    }
    if (!complete) break;
    const unitEvents = from - low;
    if (chars + unitChars > budget.maxChars || candidates.length - from + unitEvents > budget.maxEvents) break;
    chars += unitChars;
    from = low;
  }

  // The newest event is always returned, cut to fit when it alone is over budget. Only here can a
  // response appear without its call: the pair did not fit, and an empty window helps nobody.
  const nothingFits = from === candidates.length;
  if (nothingFits) from = candidates.length - 1;
  const truncateNewest = nothingFits && sizes.at(-1)! > budget.maxChars;
  const startSeq = candidates[from]!.seq;
  const endSeq = newest.seq;
  return { from, truncateNewest, omittedEvents: endSeq - windowStartSeq + 1 - (candidates.length - from), startSeq, endSeq };
}

/**
 * For each candidate, the index of the oldest event holding a call one of its responses answers
 * (its own index when it has no responses; UNRESOLVED when a call is missing). A response with an
 * id matches the newest earlier call with that id, or else the newest earlier call of its name that
 * has no id; a response without an id, the newest earlier call of its name. A response whose id
 * names a call outside the candidates must not borrow another call of the same name (two parallel
 * calls of one tool): it would return a response without its call.
 */
function earliestCallIndexes(candidates: readonly WindowEvent[]): number[] {
  const callById = new Map<string, number>();
  const callByName = new Map<string, number>();
  const idlessCallByName = new Map<string, number>();
  return candidates.map((event, index) => {
    const parts = event.content?.parts ?? [];
    let earliest = index;
    for (const part of parts) {
      const response = part.functionResponse;
      if (!response) continue;
      const partner =
        response.id !== undefined ? (callById.get(response.id) ?? idlessCallByName.get(response.name)) : callByName.get(response.name);
      if (partner === undefined) {
        earliest = UNRESOLVED;
        break;
      }
      earliest = Math.min(earliest, partner);
    }
    for (const part of parts) {
      const call = part.functionCall;
      if (!call) continue;
      if (call.id !== undefined) callById.set(call.id, index);
      else idlessCallByName.set(call.name, index);
      callByName.set(call.name, index);
    }
    return earliest;
  });
}

/**
 * Drops characters from the front of the event's text (across its text parts, oldest part first)
 * until its JSON fits maxChars, keeping the end of what was said. Marked `truncated: true`. When
 * even empty text does not fit (large call arguments or inline data), the texts are empty and the
 * event is still returned over budget.
 */
export function truncateText<E extends WindowEvent>(event: E, maxChars: number): E & { truncated: true } {
  const parts = (event.content?.parts ?? []).map((part) => ({ ...part }));
  const result = { ...event, ...(event.content ? { content: { ...event.content, parts } } : {}), truncated: true as const };
  for (const part of parts) {
    if (serializedSize(result) <= maxChars) break;
    if (part.text === undefined) continue;
    const text = part.text;
    part.text = '';
    if (serializedSize(result) > maxChars) continue; // this part goes whole; cut into the next one
    // The size shrinks as the cut grows: find the smallest cut that fits (JSON escapes make the
    // serialized length of a character 1 to 6, so it cannot be computed directly).
    // A cut never leaves half of a surrogate pair (JSON would escape the lone half to 6 characters).
    const whole = (cut: number) => (isLowSurrogate(text.charCodeAt(cut)) ? cut + 1 : cut);
    let [low, high] = [0, text.length];
    while (low < high) {
      const middle = (low + high) >>> 1;
      part.text = text.slice(whole(middle));
      if (serializedSize(result) <= maxChars) high = middle;
      else low = middle + 1;
    }
    part.text = text.slice(whole(low));
  }
  return result;
}

const isLowSurrogate = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;
