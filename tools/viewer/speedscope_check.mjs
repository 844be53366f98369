// Opens a Chrome trace-event JSON file in speedscope, in headless Chromium,
// the way a person would, and reports what speedscope made of it.
//
// Usage:
//   node tools/viewer/speedscope_check.mjs --trace FILE --chromium /usr/bin/chromium \
//       --screenshot OUT.png [--frame fetch_worker] [--timeout-ms 45000]
//
// speedscope's built files (npm package `speedscope`, pinned in package.json
// beside this script) and the trace are served by a small HTTP server of this
// script's own on 127.0.0.1, on a port the system picks; nothing else is
// reached. The page loads the trace with speedscope's `#profileURL=` and:
//
// - every console warning and error, and every uncaught page error, from the
//   load to the end, is collected with its phase: `import` until speedscope
//   shows the loaded profile (its trace-event importer warns there for each
//   end event that does not match the frame on top of the stack, and for each
//   frame still open at the end), `view` after;
// - the Left Heavy view is selected, the frame is looked up with speedscope's
//   own search in each thread's profile, and the number of matching cells is
//   read from the search box (the DOM; the flame chart itself is a canvas);
// - the loaded profiles are exported with speedscope's own export (Ctrl+S),
//   which lists every frame by the name speedscope keyed it with;
// - a screenshot of the Left Heavy view of the first profile holding the frame
//   is written to OUT.png.
//
// It prints one JSON object on stdout:
//   {"profiles": [names], "console": [{"phase", "type", "text", "url"}], "page_errors": [..],
//    "frame_names": [distinct names of frames whose name starts with the frame],
//    "frames_per_profile": {profile name: count of such frames opened in it},
//    "left_heavy_matches": {profile name: search matches in Left Heavy}}
// and exits 0; the caller judges. Exit status 2 when it cannot run (a message
// on stderr says why), 3 when it ran past --timeout-ms.

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const args = { frame: 'fetch_worker', timeoutMs: 45000 };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) fail(`${key} needs a value`);
    if (key === '--trace') args.trace = value;
    else if (key === '--chromium') args.chromium = value;
    else if (key === '--screenshot') args.screenshot = value;
    else if (key === '--frame') args.frame = value;
    else if (key === '--timeout-ms') args.timeoutMs = Number(value);
    else fail(`unknown argument ${key}`);
  }
  for (const need of ['trace', 'chromium', 'screenshot']) {
    if (!args[need]) fail(`--${need} is required`);
  }
  return args;
}

function fail(message) {
  process.stderr.write(`speedscope_check: ${message}\n`);
  process.exit(2);
}

async function importOrFail(name) {
  try {
    return await import(name);
  } catch (e) {
    fail(`cannot load the npm package ${name} (${e.message}); run scripts/install-test-tools.sh`);
  }
}

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
  '.txt': 'text/plain; charset=utf-8',
};

/** Serves speedscope's release directory and the trace at /trace.json, on loopback. */
function serve(root, trace) {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const file = url.pathname === '/trace.json' ? trace : path.join(root, path.normalize(url.pathname));
    if (file !== trace && !file.startsWith(root + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = await readFile(url.pathname === '/' ? path.join(root, 'index.html') : file);
      res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const timer = setTimeout(() => {
    process.stderr.write(`speedscope_check: still running after ${args.timeoutMs} ms\n`);
    process.exit(3);
  }, args.timeoutMs);
  const { chromium } = await importOrFail('playwright-core');
  const release = path.join(here, 'node_modules', 'speedscope', 'dist', 'release');
  try {
    await readFile(path.join(release, 'index.html'));
  } catch {
    fail(`speedscope's built files are missing from ${release}; run scripts/install-test-tools.sh`);
  }
  const server = await serve(release, path.resolve(args.trace));
  const base = `http://127.0.0.1:${server.address().port}`;
  const profileDir = mkdtempSync(path.join(tmpdir(), 'speedscope-chromium-'));
  let context;
  try {
    // A fresh profile directory (--user-data-dir), removed at the end.
    context = await chromium.launchPersistentContext(profileDir, {
      executablePath: args.chromium,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        // speedscope draws with WebGL: with --disable-gpu, Chromium 156 falls
        // back to its software renderer by itself. Should a later one stop
        // doing so, --enable-unsafe-swiftshader asks for it.
      ],
      viewport: { width: 1400, height: 800 },
      acceptDownloads: true,
    });
    const page = context.pages()[0] ?? (await context.newPage());
    const consoleMessages = [];
    const pageErrors = [];
    // `import` until speedscope shows the loaded profile, `view` after.
    let phase = 'import';
    page.on('console', (m) => {
      if (m.type() === 'warning' || m.type() === 'error') {
        consoleMessages.push({ phase, type: m.type(), text: m.text(), url: m.location().url ?? '' });
      }
    });
    page.on('pageerror', (e) => pageErrors.push(String(e)));

    await page.goto(`${base}/index.html#profileURL=${encodeURIComponent(`${base}/trace.json`)}`);
    // Loaded: the toolbar offers the views of a profile.
    await page.getByText('Left Heavy', { exact: false }).first().waitFor({ timeout: 20000 });
    phase = 'view';
    await page.getByText('Left Heavy', { exact: false }).first().click();

    // The profiles, from speedscope's own export.
    const [download] = await Promise.all([page.waitForEvent('download'), page.keyboard.press('Control+s')]);
    const exported = JSON.parse(await readFile(await download.path(), 'utf8'));
    const frames = exported.shared.frames;
    const isFrame = (name) => name === args.frame || name.startsWith(`${args.frame} `);
    const frameNames = [...new Set(frames.map((f) => f.name).filter(isFrame))];
    const framesPerProfile = {};
    for (const p of exported.profiles) {
      const opened = new Set(p.events.filter((e) => e.type === 'O' && isFrame(frames[e.frame].name)).map((e) => e.frame));
      framesPerProfile[p.name] = opened.size;
    }
    const profiles = exported.profiles.map((p) => p.name);

    // The Left Heavy view of each profile that holds the frame: speedscope's
    // search, and the match count it shows.
    const leftHeavy = {};
    let shot = false;
    for (let i = 0; i < profiles.length; i++) {
      if (i > 0) await page.keyboard.press('n');
      if (!framesPerProfile[profiles[i]]) continue;
      await page.keyboard.press('Control+f');
      // The profile selector holds a hidden input of its own: take the visible one.
      const input = page.locator('input:visible').first();
      await input.waitFor({ timeout: 5000 });
      await input.fill(args.frame);
      const count = page.getByText(/^[?\d]+\/\d+$/).first();
      await count.waitFor({ timeout: 5000 });
      leftHeavy[profiles[i]] = Number((await count.textContent()).split('/')[1]);
      if (!shot) {
        await page.screenshot({ path: args.screenshot });
        shot = true;
      }
      await input.press('Escape');
    }
    if (!shot) await page.screenshot({ path: args.screenshot });

    process.stdout.write(
      `${JSON.stringify({
        profiles,
        console: consoleMessages,
        page_errors: pageErrors,
        frame_names: frameNames,
        frames_per_profile: framesPerProfile,
        left_heavy_matches: leftHeavy,
      })}\n`,
    );
  } catch (e) {
    // What the page showed when it went wrong, for whoever reads the failure.
    const page = context?.pages()[0];
    if (page) await page.screenshot({ path: args.screenshot }).catch(() => {});
    throw e;
  } finally {
    if (context) await context.close();
    server.close();
    rmSync(profileDir, { recursive: true, force: true });
    clearTimeout(timer);
  }
}

main().catch((e) => {
  process.stderr.write(`speedscope_check: ${e.stack ?? e}\n`);
  process.exit(2);
});
