// Where a server's CPU went: reads a .cpuprofile (BENCH_CPU_PROF of bench:append, bench:read,
// bench:neighbours) and prints its busy time by package (our src/, each node_modules package, Node's
// core, GC, native) and its top functions by self time, over a window of the run if one is given
// (bench:append prints each HTTP run's window in monotonic µs, the clock of .cpuprofile timestamps)
// and per request if a count is given.
//
//   npm run -s bench:profile -- <file.cpuprofile> [<window start µs> <window end µs> [<requests>]]
// PROFILE_TOP: how many functions to list (default 30).
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, from, to, requestsArgument] = process.argv.slice(2);
if (!file) throw new Error('usage: bench/profile-summary.ts <file.cpuprofile> [<start µs> <end µs> [<requests>]]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const start = from ? Number(from) : -Infinity;
const end = to ? Number(to) : Infinity;
const requests = requestsArgument ? Number(requestsArgument) : undefined;

// A sample's time is the delta to the next one: what the sampled function held the thread for.
const selfMicros = new Map<number, number>();
let time = profile.startTime;
profile.samples.forEach((node, index) => {
  time += profile.timeDeltas[index]!;
  if (time < start || time > end) return;
  selfMicros.set(node, (selfMicros.get(node) ?? 0) + (profile.timeDeltas[index + 1] ?? 0));
});

function packageOf({ functionName, url }: ProfileNode['callFrame']): string {
  if (!url) return functionName.startsWith('(') ? functionName : `native ${functionName || '(anonymous)'}`;
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dependency) return dependency[1]!;
  if (url.includes('/src/')) return 'src (ours)';
  return url.startsWith('node:') ? 'node core' : url;
}

const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const byPackage = new Map<string, number>();
const byFunction = new Map<string, number>();
let busy = 0;
for (const [id, micros] of selfMicros) {
  const { callFrame } = nodes.get(id)!;
  const name = packageOf(callFrame);
  if (name === '(idle)') continue;
  busy += micros;
  byPackage.set(name, (byPackage.get(name) ?? 0) + micros);
  const where = `${callFrame.functionName || '(anonymous)'} ${callFrame.url.replace(/.*\/(node_modules|src)\//, '$1/')}:${callFrame.lineNumber + 1}`;
  byFunction.set(where, (byFunction.get(where) ?? 0) + micros);
}

const unit = requests ? 'µs per request' : 'ms';
const amount = (micros: number) => (requests ? micros / requests : micros / 1000).toFixed(1).padStart(9);
const share = (micros: number) => `${((100 * micros) / busy).toFixed(1).padStart(5)}%`;
const top = (table: Map<string, number>, count: number) =>
  [...table].sort((a, b) => b[1] - a[1]).slice(0, count).forEach(([name, micros]) => console.log(`${amount(micros)} ${share(micros)}  ${name}`));
console.log(`busy: ${amount(busy).trim()} ${unit}${requests ? ` (${requests} requests)` : ''}`);
console.log(`by package (${unit}, share of busy):`);
top(byPackage, 20);
console.log(`top functions by self time (${unit}, share of busy):`);
top(byFunction, Number(process.env.PROFILE_TOP ?? 30));
