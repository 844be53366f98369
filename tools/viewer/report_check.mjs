// Opens HTML reports written by `cabin-trace report` (or `bench`) from
// file:// in headless Chromium, as a person would open a CI artifact, and
// reports what the page holds.
//
// Usage:
//   node tools/viewer/report_check.mjs --chromium /usr/bin/chromium \
//       --page REPORT.html=SHOT.png [--page ...] [--timeout-ms 45000] [--max-height PX]
//
// One browser for every page. For each page it collects every console message
// of any type, every uncaught page error, every request the page made (the
// page's own file:// load excluded), the sections (id and heading), how many
// marks of each kind the charts hold, the number of points of each polyline,
// and per metric section the samples of each side and the paired ratios; and
// writes a full-page screenshot to SHOT.png (its top PX pixels with
// --max-height, as the docs' pictures are taken). It prints one JSON object, a
// list of those reports, and exits 0; the caller judges. Exit status 2 when
// it cannot run (a message on stderr says why), 3 when it ran past
// --timeout-ms.

import { pathToFileURL } from 'node:url';
import path from 'node:path';

import { deadline, launchChromium } from './headless.mjs';

const MARKS = [
  'rect.slice', 'rect.action', 'rect.test', 'rect.child', 'rect.bar', 'circle.sample', 'circle.ratio',
  'line.interval', 'circle.geo-mean', 'tr.verdict-row', 'tr.command', 'li.invalid-reason', 'h3.command-phases',
  'section.metric',
];

function fail(message) {
  process.stderr.write(`report_check: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { pages: [], timeoutMs: 45000 };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) fail(`${key} needs a value`);
    if (key === '--chromium') args.chromium = value;
    else if (key === '--page') {
      const at = value.lastIndexOf('=');
      if (at < 0) fail(`--page ${value}: expected REPORT.html=SHOT.png`);
      args.pages.push({ file: value.slice(0, at), screenshot: value.slice(at + 1) });
    } else if (key === '--timeout-ms') args.timeoutMs = Number(value);
    else if (key === '--max-height') args.maxHeight = Number(value);
    else fail(`unknown argument ${key}`);
  }
  if (!args.chromium) fail('--chromium is required');
  if (args.pages.length === 0) fail('at least one --page is required');
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const timer = deadline('report_check', args.timeoutMs);
  const browser = await launchChromium('report_check', args.chromium);
  const reports = [];
  try {
    for (const { file, screenshot } of args.pages) {
      const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
      const page = await context.newPage();
      const url = pathToFileURL(path.resolve(file)).href;
      const consoleMessages = [];
      const pageErrors = [];
      const requests = [];
      page.on('console', (m) => consoleMessages.push({ type: m.type(), text: m.text() }));
      page.on('pageerror', (e) => pageErrors.push(String(e)));
      page.on('request', (r) => {
        if (r.url() !== url) requests.push(r.url());
      });
      await page.goto(url, { waitUntil: 'load' });
      const held = await page.evaluate((marks) => {
        const sections = [...document.querySelectorAll('section[id]')].map((s) => ({
          id: s.id,
          heading: s.querySelector('h2')?.textContent ?? '',
        }));
        const counts = {};
        for (const m of marks) counts[m] = document.querySelectorAll(m).length;
        const polylines = {};
        for (const p of document.querySelectorAll('polyline')) {
          const text = (p.getAttribute('points') ?? '').trim();
          (polylines[p.getAttribute('class')] ??= []).push(text === '' ? 0 : text.split(/\s+/).length);
        }
        const metrics = [...document.querySelectorAll('section.metric')].map((s) => {
          const sides = {};
          for (const c of s.querySelectorAll('circle.sample')) {
            const side = c.getAttribute('data-side');
            sides[side] = (sides[side] ?? 0) + 1;
          }
          return {
            scenario: s.dataset.scenario,
            metric: s.dataset.metric,
            samples: sides,
            ratios: s.querySelectorAll('circle.ratio').length,
            interval: s.querySelectorAll('line.interval').length,
          };
        });
        return { title: document.title, sections, counts, polylines, metrics };
      }, MARKS);
      if (args.maxHeight) {
        const height = await page.evaluate(() => document.documentElement.scrollHeight);
        const clip = { x: 0, y: 0, width: 1100, height: Math.min(height, args.maxHeight) };
        await page.screenshot({ path: screenshot, fullPage: true, clip });
      } else {
        await page.screenshot({ path: screenshot, fullPage: true });
      }
      reports.push({ file, console: consoleMessages, page_errors: pageErrors, requests, ...held });
      await context.close();
    }
  } finally {
    await browser.close();
    clearTimeout(timer);
  }
  process.stdout.write(`${JSON.stringify(reports)}\n`);
}

main().catch((e) => {
  process.stderr.write(`report_check: ${e.stack ?? e}\n`);
  process.exit(2);
});
