//! A small real compiler wrapper with a local cache, as a build cache is:
//! `ccwrap <compiler> <arguments>` parses the arguments, hashes the inputs
//! into a cache key, looks the key up in a cache directory, and on a miss
//! runs the compiler and stores its object file.
//!
//! ```text
//! ccwrap cc -O1 -Iinclude -c src/add.c -o obj/add.o
//! ```
//!
//! It captures itself under its own prefix, `CCWRAP`: with `CCWRAP_TRACE_DIR`
//! set, or when it was started by a capture that asked its children to join
//! (`CABIN_TRACE_CHILDREN=1` on `minibuild`, which Ninja passes on as
//! `CABIN_TRACE_PARENT`), its phases land in that directory, in the parent's
//! family (see docs/family.md).
//!
//! | variable | meaning |
//! | --- | --- |
//! | `CCWRAP_CACHE_DIR` | the cache directory; unset: no cache (every call compiles) |
//! | `CCWRAP_TRACE_DIR`, `CCWRAP_TRACE_*` | the capture's variables under the `CCWRAP` prefix |
//!
//! A call that is not a compile of one source to one object (`-c` with `-o`,
//! a link, `--version`) runs the compiler as is, uncached. The exit status is
//! the compiler's.

use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use tracing::info_span;

/// What a compile call says.
struct Call {
    compiler: String,
    args: Vec<String>,
    /// The object file (`-o`), for a cacheable compile.
    output: Option<PathBuf>,
    /// The source files.
    sources: Vec<PathBuf>,
}

fn parse(argv: Vec<String>) -> Result<Call> {
    let _phase = info_span!("parse_args", args = argv.len() as u64, output = tracing::field::Empty).entered();
    let mut it = argv.into_iter();
    let Some(compiler) = it.next() else {
        bail!("usage: ccwrap <compiler> <arguments>");
    };
    let args: Vec<String> = it.collect();
    let mut output = None;
    let mut sources = Vec::new();
    let mut compile = false;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        match a.as_str() {
            "-c" => compile = true,
            "-o" => {
                output = args.get(i + 1).map(PathBuf::from);
                i += 1;
            }
            // Options taking a value as the next argument.
            "-MF" | "-MT" | "-MQ" | "-I" | "-include" | "-isystem" | "-x" => i += 1,
            _ if !a.starts_with('-') && (a.ends_with(".c") || a.ends_with(".cc") || a.ends_with(".cpp")) => {
                sources.push(PathBuf::from(a))
            }
            _ => {}
        }
        i += 1;
    }
    let cacheable = compile && sources.len() == 1;
    if let Some(o) = output.as_ref().filter(|_| cacheable) {
        // What this call builds, for a merge to find the build action that ran it.
        tracing::Span::current().record("output", o.display().to_string());
    }
    Ok(Call { compiler, args, output: output.filter(|_| cacheable), sources })
}

/// FNV-1a over the compiler, the arguments and the sources' bytes (and the
/// headers' in the same directories, crudely: every `.h` next to a source or
/// in an `-I` directory), as 16 hex digits.
fn cache_key(call: &Call) -> Result<String> {
    let phase = info_span!("hash_inputs", bytes = tracing::field::Empty, files = tracing::field::Empty);
    let _phase = phase.enter();
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.write(call.compiler.as_bytes());
    for a in &call.args {
        h.write(a.as_bytes());
        h.write(&[0]);
    }
    let mut files: Vec<PathBuf> = call.sources.clone();
    let mut dirs: Vec<PathBuf> =
        call.sources.iter().filter_map(|s| s.parent().map(Path::to_path_buf)).collect();
    for (i, a) in call.args.iter().enumerate() {
        if let Some(d) = a.strip_prefix("-I") {
            let d = if d.is_empty() { call.args.get(i + 1).map(String::as_str).unwrap_or("") } else { d };
            dirs.push(PathBuf::from(d));
        }
    }
    for d in dirs {
        let dir = if d.as_os_str().is_empty() { PathBuf::from(".") } else { d };
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut headers: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "h"))
                .collect();
            headers.sort();
            files.extend(headers);
        }
    }
    let mut bytes = 0u64;
    for f in &files {
        let data = std::fs::read(f).with_context(|| format!("{}: cannot read", f.display()))?;
        bytes += data.len() as u64;
        h.write(f.as_os_str().as_encoded_bytes());
        h.write(&data);
    }
    phase.record("bytes", bytes);
    phase.record("files", files.len() as u64);
    Ok(format!("{:016x}", h.finish()))
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Copies the cached object for `key` to `output`; false on a miss.
fn lookup(cache: &Path, key: &str, output: &Path) -> bool {
    let phase = info_span!("cache_lookup", hit = tracing::field::Empty);
    let _phase = phase.enter();
    let hit = std::fs::copy(cache.join(format!("{key}.o")), output).is_ok();
    phase.record("hit", hit);
    hit
}

fn store(cache: &Path, key: &str, output: &Path) -> Result<()> {
    let _phase = info_span!("cache_store").entered();
    std::fs::create_dir_all(cache).with_context(|| format!("{}: cannot create", cache.display()))?;
    // Written under a temporary name and renamed: a concurrent reader never
    // sees half an object.
    let tmp = cache.join(format!("{key}.o.{}", std::process::id()));
    std::fs::copy(output, &tmp).with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, cache.join(format!("{key}.o"))).context("cannot store in the cache")?;
    Ok(())
}

fn compile(call: &Call) -> Result<i32> {
    let _phase = info_span!("compile", compiler = %call.compiler).entered();
    let mut cmd = Command::new(&call.compiler);
    cmd.args(&call.args);
    let status = cabin_trace::command(&mut cmd)
        .status()
        .with_context(|| format!("cannot run the compiler {}", call.compiler))?;
    Ok(status.code().unwrap_or(1))
}

fn ccwrap(argv: Vec<String>) -> Result<i32> {
    let call = parse(argv)?;
    let cache = std::env::var_os("CCWRAP_CACHE_DIR").map(PathBuf::from);
    let (Some(output), Some(cache)) = (call.output.clone(), cache) else {
        return compile(&call);
    };
    let key = cache_key(&call)?;
    if lookup(&cache, &key, &output) {
        return Ok(0);
    }
    let code = compile(&call)?;
    if code == 0 {
        store(&cache, &key, &output)?;
    }
    Ok(code)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let capture = match cabin_trace::Capture::from_env("CCWRAP") {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ccwrap: error: {e}");
            return ExitCode::from(2);
        }
    };
    match capture.run("ccwrap", || ccwrap(argv)) {
        Ok(Ok(code)) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Ok(Err(e)) => {
            eprintln!("ccwrap: error: {e:#}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("ccwrap: error: {e}");
            ExitCode::from(2)
        }
    }
}
