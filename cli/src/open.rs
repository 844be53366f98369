//! `cabin-trace open`: show a trace in the Perfetto UI by serving that one
//! file on `127.0.0.1:9001`, as Perfetto's own `tools/open_trace_in_ui` does.
//!
//! The UI (a page of `https://ui.perfetto.dev`) may fetch from
//! `http://127.0.0.1:9001` and from no other local address: its content
//! security policy names that origin. So the port is fixed, the file is
//! answered only at `/<its name>` with `Access-Control-Allow-Origin` set to
//! the UI's origin, every other path is 404, and the server stops once the
//! file has been sent. A server of a few dozen lines on `std::net` does this;
//! an HTTP crate would bring a thread pool and more for one response.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// The only local origin the Perfetto UI fetches a trace from.
const PORT: u16 = 9001;
/// The UI's origin, the one allowed to read the response.
const UI_ORIGIN: &str = "https://ui.perfetto.dev";

/// Open a trace (`.pftrace` or `.trace.json`) in the Perfetto UI: serve that
/// one file on 127.0.0.1:9001 and open the UI's address in the default
/// browser.
///
/// Prints `https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/<name>`,
/// opens it with `$BROWSER`, else `xdg-open` or `open` when present (nothing
/// fails without one: open the address by hand), and exits once the file has
/// been fetched by the UI (a request with its Origin), after --timeout, or
/// on Ctrl-C. The file is read in the browser; nothing is uploaded.
#[derive(clap::Args)]
#[command(after_help = "Exit status: 0 once the file was fetched; 1 when nobody fetched it before \
--timeout; 2 when the file cannot be read or 127.0.0.1:9001 is taken.")]
pub struct Args {
    /// The trace to serve.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Stop serving after this many seconds if the file was not fetched.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    timeout: u64,
    /// Print the address only; do not start a browser.
    #[arg(long)]
    no_browser: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&args.file).with_context(|| {
        format!("{}: cannot be read; expected a trace file (.pftrace or .trace.json)", args.file.display())
    })?;
    let name = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{}: expected a file", args.file.display()))?;
    let path = format!("/{}", encode(&name));
    let listener = match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, PORT))) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => bail!(
            "127.0.0.1:{PORT} is taken (another trace being served, or another program): the Perfetto UI fetches \
             only from that port; stop it and try again"
        ),
        Err(e) => bail!("127.0.0.1:{PORT}: cannot listen: {e}"),
    };
    listener.set_nonblocking(true).context("cannot poll the listening socket")?;
    let url = format!("{UI_ORIGIN}/#!/?url=http://127.0.0.1:{PORT}{path}");
    println!("{url}");
    eprintln!(
        "open: serving {} ({} bytes) for the Perfetto UI until it is fetched, for at most {} s (Ctrl-C stops)",
        args.file.display(),
        bytes.len(),
        args.timeout
    );
    if !args.no_browser {
        open_browser(&url);
    }
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    while Instant::now() < deadline {
        match listener.accept() {
            Ok((stream, peer)) => match answer(stream, &path, &bytes) {
                Ok(true) => {
                    eprintln!("open: the Perfetto UI fetched {name}; done");
                    return Ok(ExitCode::SUCCESS);
                }
                Ok(false) => {}
                Err(e) => eprintln!("open: a request from {peer} failed: {e}"),
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => eprintln!("open: accept failed: {e}"),
        }
    }
    eprintln!("open: nobody fetched {name} within {} s; stopped", args.timeout);
    Ok(ExitCode::FAILURE)
}

/// Answers one request; true when it sent the whole file to the UI (a
/// request whose `Origin` is the UI's). The file goes to any client that asks
/// for its path (a browser lets only the UI's page read it), but only the UI's
/// fetch ends the serving.
fn answer(mut stream: TcpStream, path: &str, bytes: &[u8]) -> std::io::Result<bool> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut from_ui = false;
    let mut header = String::new();
    while reader.read_line(&mut header)? > 2 {
        if let Some((name, value)) = header.split_once(':') {
            from_ui |= name.trim().eq_ignore_ascii_case("origin") && value.trim() == UI_ORIGIN;
        }
        header.clear();
    }
    let mut words = request_line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let cors = format!("Access-Control-Allow-Origin: {UI_ORIGIN}\r\nVary: Origin\r\n");
    let head = |status: &str, extra: &str, len: usize| {
        format!("HTTP/1.1 {status}\r\n{cors}{extra}Content-Length: {len}\r\nConnection: close\r\n\r\n")
    };
    match (method, target == path) {
        ("GET", true) => {
            let h = head(
                "200 OK",
                "Content-Type: application/octet-stream\r\nCache-Control: no-store\r\n",
                bytes.len(),
            );
            stream.write_all(h.as_bytes())?;
            stream.write_all(bytes)?;
            stream.flush()?;
            Ok(from_ui)
        }
        ("HEAD", true) => {
            stream.write_all(
                head("200 OK", "Content-Type: application/octet-stream\r\n", bytes.len()).as_bytes(),
            )?;
            Ok(false)
        }
        ("OPTIONS", _) => {
            // A preflight, should the browser send one (Private Network Access
            // asks a loopback server before a public page's request reaches it).
            let allow = "Access-Control-Allow-Methods: GET, HEAD\r\nAccess-Control-Allow-Headers: *\r\n\
                         Access-Control-Allow-Private-Network: true\r\n";
            stream.write_all(head("204 No Content", allow, 0).as_bytes())?;
            Ok(false)
        }
        ("GET" | "HEAD", false) => {
            let body = format!("only {path} is served here\n");
            stream.write_all(head("404 Not Found", "Content-Type: text/plain\r\n", body.len()).as_bytes())?;
            stream.write_all(body.as_bytes())?;
            Ok(false)
        }
        _ => {
            stream
                .write_all(head("405 Method Not Allowed", "Allow: GET, HEAD, OPTIONS\r\n", 0).as_bytes())?;
            Ok(false)
        }
    }
}

/// A file name as a URL path segment: bytes other than letters, digits and
/// `-._~` percent-encoded.
fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Starts the default browser on `url` where one is configured; says so
/// when none is, and never fails.
fn open_browser(url: &str) {
    let from_env = std::env::var("BROWSER").ok().and_then(|b| b.split(':').next().map(str::to_string));
    let candidates: Vec<String> = match from_env.filter(|b| !b.trim().is_empty()) {
        Some(b) => vec![b],
        None => ["xdg-open", "open"].iter().filter(|p| on_path(p)).map(|p| p.to_string()).collect(),
    };
    for program in candidates {
        let words = shlex::split(&program).unwrap_or_else(|| vec![program.clone()]);
        let Some((first, rest)) = words.split_first() else { continue };
        let started = Command::new(first)
            .args(rest)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if started.is_ok() {
            return;
        }
    }
    eprintln!("open: no browser configured ($BROWSER, xdg-open, open); open the address above by hand");
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_is_percent_encoded_as_a_path_segment() {
        assert_eq!(encode("build-1-2-1.pftrace"), "build-1-2-1.pftrace");
        assert_eq!(encode("a b#?.json"), "a%20b%23%3F.json");
    }
}
