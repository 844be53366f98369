// What the headless Chromium checks of this directory share: a deadline, and
// Debian's Chromium started through playwright-core (which downloads no
// browser of its own).

// Exits with status 3 once `ms` have passed; returns the timer to clear.
export function deadline(script, ms) {
  return setTimeout(() => {
    process.stderr.write(`${script}: still running after ${ms} ms\n`);
    process.exit(3);
  }, ms);
}

// Debian's Chromium at `executablePath`, headless, with `extraArgs`; exits
// with status 2 and the way to install it when playwright-core is missing.
export async function launchChromium(script, executablePath, extraArgs = []) {
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch (e) {
    process.stderr.write(
      `${script}: cannot load the npm package playwright-core (${e.message}); run scripts/install-test-tools.sh\n`,
    );
    process.exit(2);
  }
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', ...extraArgs],
  });
}
