//! A tiny real build tool: writes a small C project and its `build.ninja`,
//! builds it with real Ninja and the C compiler, then runs its tests, all
//! under capture when `CABIN_TRACE_DIR` is set.
//!
//! ```text
//! cargo run --release --example minibuild -- [--cc-wrapper PATH] [DIR]
//! ```
//!
//! With `--cc-wrapper PATH` (or `MINIBUILD_CC_WRAPPER=PATH`), every compile
//! runs as `PATH <compiler> <arguments>`, e.g. through the `ccwrap` example;
//! links and the archive do not. With `CABIN_TRACE_CHILDREN=1` as well, each
//! wrapper captures itself into the same directory, in minibuild's family.
//!
//! DIR is created if missing (a new temporary directory when not given). A
//! second run in the same DIR is a no-op build: Ninja runs no action, and the
//! summary says `"ninja": {"status": "available", "actions": 0}`.
//!
//! Ninja is `$NINJA`, else `ninja` on PATH, else the newest one that
//! `scripts/install-ninja.sh` installed; the compiler is `$CC`, else `cc`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use tracing::{debug_span, info_span};

/// The project: (path, contents). Three library sources, an app, a test. A
/// clean build runs 8 actions: 5 compiles, the archive, and 2 links.
const FILES: &[(&str, &str)] = &[
    (
        "include/mathlib.h",
        "#ifndef MATHLIB_H\n#define MATHLIB_H\nlong ml_add(long a, long b);\nlong ml_mul(long a, long b);\nlong ml_pow(long base, unsigned exp);\n#endif\n",
    ),
    ("src/add.c", "#include \"mathlib.h\"\nlong ml_add(long a, long b) { return a + b; }\n"),
    ("src/mul.c", "#include \"mathlib.h\"\nlong ml_mul(long a, long b) { long r = 0; for (long i = 0; i < b; i++) r = ml_add(r, a); return r; }\n"),
    ("src/pow.c", "#include \"mathlib.h\"\nlong ml_pow(long base, unsigned exp) { long r = 1; while (exp--) r = ml_mul(r, base); return r; }\n"),
    ("src/main.c", "#include <stdio.h>\n#include \"mathlib.h\"\nint main(void) { printf(\"2^10 = %ld\\n\", ml_pow(2, 10)); return 0; }\n"),
    (
        "tests/test_math.c",
        "#include <stdio.h>\n#include \"mathlib.h\"\nint main(void) {\n  int bad = 0;\n  bad += ml_add(2, 3) != 5;\n  bad += ml_mul(4, 5) != 20;\n  bad += ml_pow(3, 4) != 81;\n  printf(\"%d failures\\n\", bad);\n  return bad != 0;\n}\n",
    ),
];

fn build_ninja(cc: &str, wrapper: Option<&Path>) -> String {
    let compile = match wrapper {
        Some(w) => format!("{} $cc", w.display()),
        None => "$cc".to_string(),
    };
    format!(
        "# Written by the minibuild example.\n\
         cc = {cc}\n\
         cflags = -O1 -Iinclude\n\
         rule cc\n  command = {compile} $cflags -MMD -MF $out.d -c $in -o $out\n  depfile = $out.d\n  deps = gcc\n  description = CC $out\n\
         rule ar\n  command = rm -f $out && ar crs $out $in\n  description = AR $out\n\
         rule link\n  command = $cc $in -o $out\n  description = LINK $out\n\
         build obj/add.o: cc src/add.c\n\
         build obj/mul.o: cc src/mul.c\n\
         build obj/pow.o: cc src/pow.c\n\
         build obj/main.o: cc src/main.c\n\
         build obj/test_math.o: cc tests/test_math.c\n\
         build libmath.a: ar obj/add.o obj/mul.o obj/pow.o\n\
         build app: link obj/main.o libmath.a\n\
         build test_math: link obj/test_math.o libmath.a\n\
         default app test_math\n"
    )
}

/// Writes `contents` to `path` unless it already holds exactly that, so that
/// a second run leaves every input untouched.
fn write_if_changed(path: &Path, contents: &str) -> Result<bool, String> {
    let _s = debug_span!("write_if_changed", bytes = contents.len() as u64, changed = tracing::field::Empty)
        .entered();
    if std::fs::read(path).ok().as_deref() == Some(contents.as_bytes()) {
        _s.record("changed", false);
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: cannot create: {e}", parent.display()))?;
    }
    std::fs::write(path, contents).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    _s.record("changed", true);
    Ok(true)
}

fn find_ninja() -> Result<PathBuf, String> {
    if let Some(n) = std::env::var_os("NINJA") {
        return Ok(PathBuf::from(n));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("ninja");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    let installed = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/ninja");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(&installed)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path().join("ninja")).filter(|p| p.exists()).collect())
        .unwrap_or_default();
    versions.sort();
    versions.pop().ok_or_else(|| {
        "no ninja found: set NINJA, put ninja on PATH, or run scripts/install-ninja.sh".to_string()
    })
}

fn configure(dir: &Path, cc: &str, wrapper: Option<&Path>) -> Result<usize, String> {
    let _phase = info_span!("configure", files = FILES.len() as u64 + 1).entered();
    let mut changed = 0;
    for (name, contents) in FILES {
        changed += usize::from(write_if_changed(&dir.join(name), contents)?);
    }
    changed += usize::from(write_if_changed(&dir.join("build.ninja"), &build_ninja(cc, wrapper))?);
    Ok(changed)
}

fn build(dir: &Path, ninja: &Path) -> Result<String, String> {
    let _phase = info_span!("build").entered();
    let mut cmd = Command::new(ninja);
    cmd.arg("-C").arg(dir).arg("--quiet").stdout(std::process::Stdio::null());
    let run = cabin_trace::run_ninja(&mut cmd, dir.join(".ninja_log"))
        .map_err(|e| format!("cannot run {}: {e}", ninja.display()))?;
    if !run.status.success() {
        return Err(format!("the build failed: ninja exited with {}", run.status));
    }
    Ok(match run.delta.actions() {
        Some(actions) => format!("build: {} actions", actions.len()),
        None => format!("build: actions unknown ({})", run.delta.reason().unwrap_or("no reason")),
    })
}

fn test(dir: &Path) -> Result<String, String> {
    let _phase = info_span!("test", executables = 1u64).entered();
    let out = cabin_trace::run_test(&mut Command::new(dir.join("test_math")))
        .map_err(|e| format!("cannot run the tests: {e}"))?;
    if !out.status.success() {
        return Err(format!("tests failed: {}", String::from_utf8_lossy(&out.stdout).trim()));
    }
    Ok(format!("test: {}", String::from_utf8_lossy(&out.stdout).trim()))
}

fn minibuild(dir: &Path, wrapper: Option<&Path>) -> Result<String, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let ninja = {
        let _s = info_span!("find_ninja").entered();
        find_ninja()?
    };
    let changed = configure(dir, &cc, wrapper)?;
    let built = build(dir, &ninja)?;
    let tested = test(dir)?;
    Ok(format!("configure: {changed} files written\n{built}\n{tested}\n"))
}

fn main() -> ExitCode {
    let mut wrapper = std::env::var_os("MINIBUILD_CC_WRAPPER").map(PathBuf::from);
    let mut dir = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        if a == "--cc-wrapper" {
            match args.next() {
                Some(w) => wrapper = Some(PathBuf::from(w)),
                None => {
                    eprintln!("error: --cc-wrapper needs a path");
                    return ExitCode::from(2);
                }
            }
        } else {
            dir = Some(PathBuf::from(a));
        }
    }
    let dir = match dir {
        Some(d) => d,
        None => {
            let base = std::env::temp_dir().join(format!("minibuild-{}", std::process::id()));
            eprintln!("minibuild: building in {}", base.display());
            base
        }
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: {}: cannot create the project directory: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let capture = match cabin_trace::Capture::from_env(cabin_trace::CABIN_PREFIX) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if !capture.is_enabled() {
        eprintln!("minibuild: capture is off; set CABIN_TRACE_DIR=<dir> to write a trace of this build");
    }
    let (result, report) = match capture.run_with_report("minibuild", || minibuild(&dir, wrapper.as_deref()))
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(report) = report {
        for f in report.files.iter().filter(|f| f.complete) {
            eprintln!("minibuild: wrote {}", f.path.display());
        }
        if let Some(s) = report.files.iter().find(|f| f.complete && f.sink == "summary") {
            if let Ok(t) = cabin_trace::Timings::from_path(&s.path) {
                eprint!("{}", t.table(8));
            }
        }
    }
    match result {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
