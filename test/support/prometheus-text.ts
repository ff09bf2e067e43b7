// The Prometheus text exposition format as GET /metrics writes it, read strictly, for the tests.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

// Prometheus reads values with Go's ParseFloat, which takes NaN and Inf in any case: prom-client
// writes `Nan` (the event-loop lag before its first sample).
const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?[0-9.e+-]+|nan|[+-]inf)$/i;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/gy;

/** Parses the text exposition format strictly: every line is a comment or a sample. */
export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$/.test(line)) continue;
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw new Error(`not a Prometheus text line: ${line}`);
    const labels: Record<string, string> = {};
    const body = match[2] ?? '';
    LABEL.lastIndex = 0;
    let consumed = 0;
    for (let label = LABEL.exec(body); label; label = LABEL.exec(body)) {
      labels[label[1]!] = label[2]!;
      consumed = LABEL.lastIndex;
    }
    if (consumed !== body.length) throw new Error(`malformed labels: ${line}`);
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the sample with exactly these labels; 0 when absent (a counter not yet touched). */
export function sampleValue(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const wanted = JSON.stringify(Object.entries(labels).sort());
  const found = samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === wanted);
  return found?.value ?? 0;
}
