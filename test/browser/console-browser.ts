// The Debian chromium (apt-get install chromium), driven by playwright-core: nothing is downloaded.
// Each browser gets a fresh profile directory, removed when it closes.
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

export interface ConsoleBrowser {
  context: BrowserContext;
  newPage(viewport?: { width: number; height: number }): Promise<Page>;
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
  return {
    context,
    async newPage(viewport = DESKTOP) {
      const page = await context.newPage();
      // What the page itself reports goes to the test's output, where a failure is read.
      page.on('pageerror', (error) => console.error(`[console page error] ${error.message}`));
      page.on('response', (response) => response.status() >= 400 && console.error(`[console request] ${response.status()} ${response.request().method()} ${response.url()}`));
      await page.setViewportSize(viewport);
      return page;
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
