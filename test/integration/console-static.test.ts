// /console: the built console's files, with a content security policy that lets only its own
// scripts run and talk only to this origin; a clear 503 when the console was not built.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

let database: TestDatabase;
let dist: string;
beforeAll(async () => {
  database = await createTestDatabase();
  dist = await mkdtemp(join(tmpdir(), 'console-dist-'));
  await mkdir(join(dist, 'assets'));
  await writeFile(join(dist, 'index.html'), '<!doctype html><title>console</title>');
  await writeFile(join(dist, 'assets', 'index-abc.js'), 'console.log(1)');
});
afterAll(async () => {
  await database?.dispose();
  await rm(dist, { recursive: true, force: true });
});

const appWith = (consoleDir: string) => buildApp({ db: database.db, limits: DEFAULT_LIMITS, pageTokenKey: TEST_PAGE_TOKEN_KEY, consoleDir });

describe('/console', () => {
  it('serves the page at /console and /console/, and hashed assets for a year, under a strict CSP', async () => {
    const app = await appWith(dist);
    for (const url of ['/console', '/console/']) {
      const page = await app.inject({ method: 'GET', url });
      expect([page.statusCode, page.headers['content-type'], page.body]).toEqual([200, 'text/html; charset=utf-8', '<!doctype html><title>console</title>']);
      expect(page.headers['content-security-policy']).toContain("script-src 'self'");
      expect(page.headers['content-security-policy']).toContain("connect-src 'self'");
      expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(page.headers['cache-control']).toBe('no-cache');
    }
    const asset = await app.inject({ method: 'GET', url: '/console/assets/index-abc.js' });
    expect([asset.statusCode, asset.headers['content-type'], asset.headers['cache-control']]).toEqual([200, 'text/javascript; charset=utf-8', 'public, max-age=31536000, immutable']);
    expect((await app.inject({ method: 'GET', url: '/console/assets/missing.js' })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/console/../package.json' })).statusCode).not.toBe(200);
    await app.close();
  });

  it('answers 503 saying how to build it when console/dist is missing', async () => {
    const app = await appWith(join(dist, 'nothing-here'));
    const res = await app.inject({ method: 'GET', url: '/console/' });
    expect(res.statusCode).toBe(503);
    expect(res.body).toContain('npm run console:build');
    await app.close();
  });
});
