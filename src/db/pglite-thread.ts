// The embedded database on a thread of its own. PGlite runs each statement to its end inside one
// synchronous WebAssembly call, so on the server's thread a 50 ms statement (a state-at of a 1 MB
// state) stalled every other request's parsing, authentication and answer for those 50 ms, and the
// database's work and the server's never used the machine's second core. On a worker thread the
// server only talks to it over pglite-socket's Unix socket, as it already did: what it waits for is
// the statement, not the thread.
//
// The worker is a short CommonJS script (eval), not a module file: the same code then runs under
// tsx, the compiled build and the test runner, none of which has to load TypeScript into the
// worker. It requires PGlite and pglite-socket by the paths this module resolves.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';

const require = createRequire(import.meta.url);

/** The CommonJS entry points the worker requires, resolved once from this module. */
const MODULES = {
  pglite: require.resolve('@electric-sql/pglite'),
  pgTrgm: require.resolve('@electric-sql/pglite/contrib/pg_trgm'),
  socket: require.resolve('@electric-sql/pglite-socket'),
};

/** A compiled WebAssembly.Module, opaque here: it only travels to the worker (lib ES2023 has no WebAssembly types). */
type CompiledWasm = object;
const { WebAssembly: wasm } = globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<CompiledWasm> } };

/** PGlite's WebAssembly, compiled, and its file-system bundle: PGlite.create() options. */
interface PgliteAssets {
  pgliteWasmModule?: CompiledWasm;
  initdbWasmModule?: CompiledWasm;
  fsBundle?: Blob;
}

/** What the worker needs: the packages' CommonJS entry points, and where and how to open the database. */
interface ThreadData {
  modules: typeof MODULES;
  assets: PgliteAssets;
  dataDir: string | undefined;
  snapshot: Blob | undefined;
  socketPath: string;
}

type ThreadMessage = { ready: true } | { closed: true } | { failed: Error };

const WORKER_SCRIPT = `
const { parentPort, workerData } = require('node:worker_threads');
const { PGlite } = require(workerData.modules.pglite);
const { pg_trgm } = require(workerData.modules.pgTrgm);
const { PGLiteSocketServer } = require(workerData.modules.socket);
(async () => {
  let pglite;
  let server;
  try {
    const loadDataDir = workerData.snapshot ? { loadDataDir: workerData.snapshot } : {};
    pglite = await PGlite.create(workerData.dataDir, { extensions: { pg_trgm }, ...workerData.assets, ...loadDataDir });
    server = new PGLiteSocketServer({ db: pglite, path: workerData.socketPath });
    await server.start();
  } catch (error) {
    await pglite?.close().catch(() => {});
    parentPort.postMessage({ failed: error });
    return;
  }
  parentPort.once('message', async () => {
    await server.stop();
    await pglite.close();
    parentPort.postMessage({ closed: true });
  });
  parentPort.postMessage({ ready: true });
})();
`;

let assets: Promise<PgliteAssets> | undefined;

/**
 * PGlite's WebAssembly compiled once per process and handed to every thread (a compiled module
 * crosses to a worker without being compiled again): a new thread would otherwise compile its
 * 9 MB again, about a second here, for each database a process opens (the tests open one per
 * file). Read from the package's dist/; should its files move, each thread loads its own.
 */
function pgliteAssets(): Promise<PgliteAssets> {
  assets ??= (async () => {
    const dist = dirname(MODULES.pglite);
    try {
      const [pglite, initdb, bundle] = await Promise.all(['pglite.wasm', 'initdb.wasm', 'pglite.data'].map((file) => readFile(join(dist, file))));
      const [pgliteWasmModule, initdbWasmModule] = await Promise.all([wasm.compile(pglite!), wasm.compile(initdb!)]);
      return { pgliteWasmModule, initdbWasmModule, fsBundle: new Blob([bundle!]) };
    } catch {
      return {};
    }
  })();
  return assets;
}

export interface PgliteThread {
  /** Stops the socket server and closes PGlite (its files consistent), then ends the thread. */
  close(): Promise<void>;
}

/**
 * Opens PGlite on `dataDir` (in memory when undefined; from `snapshot` when given) on a worker
 * thread and serves it on `socketPath`. Rejects with PGlite's own error when it cannot open.
 */
export async function startPgliteThread(options: { dataDir: string | undefined; snapshot: Blob | undefined; socketPath: string }): Promise<PgliteThread> {
  const workerData: ThreadData = { modules: MODULES, assets: await pgliteAssets(), ...options };
  // No TypeScript loader flags for the eval'd script: it is plain CommonJS.
  const worker = new Worker(WORKER_SCRIPT, { eval: true, workerData, execArgv: [] });
  const next = () =>
    new Promise<ThreadMessage>((resolve, reject) => {
      const onExit = (code: number) => reject(new Error(`the embedded database's thread ended (exit code ${code})`));
      worker.once('error', reject);
      worker.once('exit', onExit);
      worker.once('message', (message: ThreadMessage) => {
        worker.off('error', reject);
        worker.off('exit', onExit);
        resolve(message);
      });
    });
  const opened = await next();
  if ('failed' in opened) {
    await worker.terminate();
    throw opened.failed;
  }
  return {
    async close() {
      const closed = next();
      worker.postMessage('close');
      await closed;
      await worker.terminate();
    },
  };
}
