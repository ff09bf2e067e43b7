// The Debian chromium (apt-get install chromium), driven by playwright-core: nothing is downloaded.
// Each browser gets a fresh profile directory, removed when it closes. What goes wrong in a page
// (an uncaught error, an error answer no test expected) is collected, and `takeProblems` hands it
// to the test, which fails on it.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, type Page, chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/** An error answer a test expects, by status and URL: any other 4xx or 5xx fails the test. */
export interface ExpectedAnswer {
  status: number;
  url: RegExp;
}

export interface PageOptions {
  viewport?: { width: number; height: number };
  expectedAnswers?: ExpectedAnswer[];
}

export interface ConsoleBrowser {
  context: BrowserContext;
  newPage(options?: PageOptions): Promise<Page>;
  /**
   * Closes the pages opened since the last call and answers their page errors and unexpected error
   * answers: a test's afterEach expects none.
   */
  endTest(): Promise<string[]>;
  close(): Promise<void>;
}

export async function openBrowser(): Promise<ConsoleBrowser> {
  if (!existsSync(CHROMIUM)) throw new Error(`No chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does), or set CHROMIUM_PATH.`);
  const profile = await mkdtemp(join(tmpdir(), 'console-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: DESKTOP,
    acceptDownloads: true,
  });
  context.setDefaultTimeout(10_000);
  let problems: string[] = [];
  let pages: Page[] = [];
  return {
    context,
    async newPage({ viewport = DESKTOP, expectedAnswers = [] } = {}) {
      const page = await context.newPage();
      pages.push(page);
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      page.on('response', (response) => {
        const status = response.status();
        if (status < 400 || expectedAnswers.some((expected) => expected.status === status && expected.url.test(response.url()))) return;
        problems.push(`unexpected answer: ${status} ${response.request().method()} ${response.url()}`);
      });
      await page.setViewportSize(viewport);
      return page;
    },
    async endTest() {
      await Promise.all(pages.map((page) => page.close()));
      const taken = problems;
      [pages, problems] = [[], []];
      return taken;
    },
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** Saved only when CONSOLE_SCREENSHOTS names a directory (to look at them; never committed). */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.CONSOLE_SCREENSHOTS;
  if (dir) await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}
