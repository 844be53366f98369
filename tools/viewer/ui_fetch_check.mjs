// Fetches a URL from pages of given origins in headless Chromium, as the
// Perfetto UI (https://ui.perfetto.dev) fetches a trace that
// `cabin-trace open` serves, so that the browser's own CORS check judges the
// server's answer.
//
// Usage:
//   node tools/viewer/ui_fetch_check.mjs --chromium /usr/bin/chromium \
//       --url http://127.0.0.1:9001/NAME --origin https://example.com \
//       --origin https://ui.perfetto.dev [--timeout-ms 30000]
//
// Each origin's page is an empty document that playwright answers in place
// of the real site (nothing is fetched from the network); in it, the script
// runs `fetch(URL)` and reads the body. Chromium asks the user before a public
// page reaches the loopback address (Local Network Access); the flag that
// turns the question off stands for the user's "allow": the CORS check still
// applies. It prints a JSON list, per origin {origin, status, bytes} or
// {origin, error}, with the console messages, and exits 0; the caller judges.
// Exit status 2 when it cannot run, 3 when it ran past --timeout-ms.

import { deadline, launchChromium } from './headless.mjs';

function fail(message) {
  process.stderr.write(`ui_fetch_check: ${message}\n`);
  process.exit(2);
}

const args = { origins: [], timeoutMs: 30000 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const [key, value] = [argv[i], argv[i + 1]];
  if (value === undefined) fail(`${key} needs a value`);
  if (key === '--chromium') args.chromium = value;
  else if (key === '--url') args.url = value;
  else if (key === '--origin') args.origins.push(value);
  else if (key === '--timeout-ms') args.timeoutMs = Number(value);
  else fail(`unknown argument ${key}`);
}
if (!args.chromium || !args.url || args.origins.length === 0) fail('--chromium, --url and --origin are required');

const timer = deadline('ui_fetch_check', args.timeoutMs);
const browser = await launchChromium('ui_fetch_check', args.chromium, ['--disable-features=LocalNetworkAccessChecks']);
const results = [];
try {
  for (const origin of args.origins) {
    const context = await browser.newContext();
    const page = await context.newPage();
    const consoleMessages = [];
    page.on('console', (m) => consoleMessages.push(`${m.type()}: ${m.text()}`));
    await page.route(`${origin}/**`, (route) =>
      route.fulfill({ contentType: 'text/html', body: '<!DOCTYPE html><title>origin</title>' }));
    await page.goto(`${origin}/`);
    const fetched = await page.evaluate(async (url) => {
      try {
        const response = await fetch(url);
        const body = await response.arrayBuffer();
        return { status: response.status, bytes: body.byteLength };
      } catch (e) {
        return { error: String(e) };
      }
    }, args.url);
    results.push({ origin, ...fetched, console: consoleMessages });
    await context.close();
  }
} finally {
  await browser.close();
  clearTimeout(timer);
}
process.stdout.write(`${JSON.stringify(results)}\n`);
