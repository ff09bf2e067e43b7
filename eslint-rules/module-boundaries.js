// Module boundaries as lint rules (docs/design.md §9). A module is a folder src/modules/<name>/;
// its public entry is src/modules/<name>/index.ts. Plain ESM so eslint.config.js loads it without a
// build step.
import fs from 'node:fs';
import path from 'node:path';

const MODULE_PATH = /[\\/]src[\\/]modules[\\/]([^\\/]+)[\\/](.+)$/;

/** The module a file belongs to and its path inside the module, or undefined outside src/modules. */
function moduleOf(file) {
  const m = MODULE_PATH.exec(path.resolve(file));
  return m ? { name: m[1], rest: m[2].split(path.sep).join('/') } : undefined;
}

/** The absolute path a relative import names, or undefined for a package import. */
function resolveImport(fromFile, source) {
  if (!source.startsWith('.')) return undefined;
  return path.resolve(path.dirname(path.resolve(fromFile)), source);
}

/** Every import-like node with a string source: import, export … from, import('…'). */
function onImports(check) {
  const visit = (node) => {
    if (node.source && typeof node.source.value === 'string') check(node, node.source.value);
  };
  return {
    ImportDeclaration: visit,
    ExportNamedDeclaration: visit,
    ExportAllDeclaration: visit,
    ImportExpression: (node) => {
      if (node.source.type === 'Literal' && typeof node.source.value === 'string') check(node, node.source.value);
    },
  };
}

/** True when an import brings in types only (`import type …`, or every specifier `type …`). */
function typeOnly(node) {
  if (node.importKind === 'type' || node.exportKind === 'type') return true;
  const specifiers = node.specifiers ?? [];
  return specifiers.length > 0 && specifiers.every((s) => s.importKind === 'type' || s.exportKind === 'type');
}

const noDeepImport = {
  meta: {
    type: 'problem',
    docs: { description: 'A module imports another module only through its index.js.' },
    schema: [],
    messages: {
      deep: "'{{from}}' imports '{{source}}', inside module '{{to}}': import its index.js instead (add what you need to that public entry).",
    },
  },
  create(context) {
    // A module's files, and the wiring outside the modules (src/app.ts, src/routes.ts, src/cli …).
    const self = moduleOf(context.filename) ?? (/[\\/]src[\\/]/.test(context.filename) ? { name: 'src' } : undefined);
    if (!self) return {};
    return onImports((node, source) => {
      const target = resolveImport(context.filename, source);
      const other = target && moduleOf(target);
      if (!other || other.name === self.name) return;
      if (other.rest !== 'index.js' && other.rest !== 'index.ts' && other.rest !== 'index') {
        context.report({ node, messageId: 'deep', data: { from: self.name, to: other.name, source } });
      }
    });
  },
};

const noRepositoryInEntry = {
  meta: {
    type: 'problem',
    docs: { description: "A module's index.ts re-exports nothing from a repository." },
    schema: [],
    messages: {
      repository: "The public entry re-exports '{{source}}': repositories stay private; export a service function or a model type instead.",
    },
  },
  create(context) {
    const self = moduleOf(context.filename);
    if (!self || self.rest !== 'index.ts') return {};
    return onImports((node, source) => {
      if (/\.repository(\.js|\.ts)?$/.test(source)) context.report({ node, messageId: 'repository', data: { source } });
    });
  },
};

// The module graph, read once per lint run (per modules folder): module → modules it imports.
const graphs = new Map();
const IMPORT_SOURCE = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g;

function listTs(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listTs(full));
    else if (entry.name.endsWith('.ts')) out.push(full);
  }
  return out;
}

function moduleGraph(root) {
  const cached = graphs.get(root);
  if (cached) return cached;
  const graph = new Map();
  for (const name of fs.readdirSync(root)) {
    const dir = path.join(root, name);
    if (!fs.statSync(dir).isDirectory()) continue;
    const edges = new Set();
    for (const file of listTs(dir)) {
      const text = fs.readFileSync(file, 'utf8');
      for (const m of text.matchAll(IMPORT_SOURCE)) {
        const target = resolveImport(file, m[1]);
        const other = target && moduleOf(target);
        if (other && other.name !== name) edges.add(other.name);
      }
    }
    graph.set(name, edges);
  }
  graphs.set(root, graph);
  return graph;
}

/** The shortest path of modules from `from` to `to` in the graph, or undefined. */
function pathBetween(graph, from, to) {
  const previous = new Map([[from, undefined]]);
  const queue = [from];
  while (queue.length > 0) {
    const at = queue.shift();
    if (at === to) {
      const steps = [];
      for (let n = at; n !== undefined; n = previous.get(n)) steps.unshift(n);
      return steps;
    }
    for (const next of graph.get(at) ?? []) {
      if (!previous.has(next)) {
        previous.set(next, at);
        queue.push(next);
      }
    }
  }
  return undefined;
}

const noModuleCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'Modules import each other without cycles.' },
    schema: [{ type: 'object', properties: { root: { type: 'string' } }, additionalProperties: false }],
    messages: { cycle: 'Module cycle: {{cycle}}.' },
  },
  create(context) {
    const self = moduleOf(context.filename);
    if (!self) return {};
    const root = path.resolve(context.options[0]?.root ?? path.join(context.cwd, 'src/modules'));
    return onImports((node, source) => {
      const target = resolveImport(context.filename, source);
      const other = target && moduleOf(target);
      if (!other || other.name === self.name) return;
      const back = pathBetween(moduleGraph(root), other.name, self.name);
      if (back) context.report({ node, messageId: 'cycle', data: { cycle: [self.name, ...back].join(' → ') } });
    });
  },
};

// Every file under src/modules has a role by its name, and the folder-wide rule applies to all of
// them: only repositories query (kysely, pg, src/db beyond types), only routes speak HTTP (fastify,
// src/http beyond the shared zod schemas), and routes never reach a repository. Type-only imports
// are free: a service names `Database` to open its transaction, a model names the row it maps.
const HTTP_SHARED = ['http/schemas.js'];
// The SQLSTATE and constraint names turned into domain errors: the database's vocabulary, not a query.
const DB_SHARED = ['db/errors.js'];

const fileRoles = {
  meta: {
    type: 'problem',
    docs: { description: 'Only repositories query; only routes speak HTTP.' },
    schema: [
      {
        type: 'object',
        properties: {
          queryExceptions: { type: 'array', items: { type: 'string' } },
          httpExceptions: { type: 'array', items: { type: 'string' } },
        },
        additionalProperties: false,
      },
    ],
    messages: {
      query: "'{{source}}' is query code: only *.repository.ts files in src/modules import kysely, pg or src/db (types and db/errors.js aside).",
      http: "'{{source}}' is HTTP code: only *.routes.ts files in src/modules import fastify or src/http (types and http/schemas.js aside).",
      repository: 'Routes call services; queries live in repositories.',
      builder: "'{{method}}' builds a query: only *.repository.ts files in src/modules query.",
    },
  },
  create(context) {
    const self = moduleOf(context.filename);
    if (!self) return {};
    const options = context.options[0] ?? {};
    const file = `${self.name}/${self.rest}`;
    const isRepository = /\.repository\.ts$/.test(self.rest);
    const isRoutes = /\.routes\.ts$/.test(self.rest);
    const mayQuery = isRepository || (options.queryExceptions ?? []).includes(file);
    const mayHttp = isRoutes || (options.httpExceptions ?? []).includes(file);
    const srcRoot = path.resolve(context.filename.slice(0, context.filename.search(/[\\/]src[\\/]modules[\\/]/)), 'src');
    const imports = onImports((node, source) => {
      if (typeOnly(node)) return;
      const target = resolveImport(context.filename, source);
      const inSrc = target && path.relative(srcRoot, target).split(path.sep).join('/');
      const isDb = source === 'kysely' || source === 'pg' || source.startsWith('pg/') || (inSrc?.startsWith('db/') === true && !DB_SHARED.includes(inSrc));
      const isHttp = source === 'fastify' || source.startsWith('@fastify/') || (inSrc?.startsWith('http/') === true && !HTTP_SHARED.includes(inSrc));
      if (isDb && !mayQuery) context.report({ node, messageId: 'query', data: { source } });
      if (isHttp && !mayHttp) context.report({ node, messageId: 'http', data: { source } });
      if (isRoutes && /\.repository(\.js|\.ts)?$/.test(source)) context.report({ node, messageId: 'repository' });
    });
    if (mayQuery) return imports;
    // A query built on an executor passed in needs no import: catch Kysely's query builders too.
    return {
      ...imports,
      'CallExpression > MemberExpression.callee > Identifier.property'(node) {
        if (QUERY_BUILDERS.has(node.name)) context.report({ node, messageId: 'builder', data: { method: node.name } });
      },
    };
  },
};
const QUERY_BUILDERS = new Set(['selectFrom', 'insertInto', 'updateTable', 'deleteFrom', 'mergeInto', 'replaceInto']);

export default {
  meta: { name: 'module-boundaries' },
  rules: {
    'no-deep-import': noDeepImport,
    'no-repository-in-entry': noRepositoryInEntry,
    'no-module-cycle': noModuleCycle,
    'file-roles': fileRoles,
  },
};
