//! `cabin-trace open`: one trace served on 127.0.0.1:9001 to a client that
//! sends the Perfetto UI's Origin, as the UI fetches it; nothing else served.
//! The tests that need the port take turns.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::support::*;

/// The port is the UI's: one test at a time holds it.
static PORT_9001: Mutex<()> = Mutex::new(());

/// A GET of `path` with the UI's Origin: the status line, the headers
/// (lower-case names) and the body.
fn get(path: &str) -> (String, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect("127.0.0.1:9001").expect("connect to 127.0.0.1:9001");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:9001\r\nOrigin: https://ui.perfetto.dev\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').expect("a header line");
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut body = Vec::new();
    r.read_to_end(&mut body).unwrap();
    (status.trim_end().to_string(), headers, body)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn demo_pftrace(dir: &Path) -> std::path::PathBuf {
    let o = Command::new(demo_exe()).arg("--no-table").env("CABIN_TRACE_DIR", dir).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "pftrace"))
        .expect("the demo wrote a .pftrace")
}

#[test]
fn open_serves_the_trace_with_the_ui_s_cors_header_refuses_other_paths_and_exits_once_fetched() {
    let _port = PORT_9001.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let trace = demo_pftrace(dir.path());
    let name = trace.file_name().unwrap().to_str().unwrap().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cabin-trace"))
        .args(["open", "--no-browser", "--timeout", "60"])
        .arg(&trace)
        .env_remove("BROWSER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first.trim(), format!("https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/{name}"));

    let (status, _, _) = get("/etc/passwd");
    assert!(status.starts_with("HTTP/1.1 404"), "another path is refused: {status}");
    let (status, _, _) = get(&format!("/{name}.other"));
    assert!(status.starts_with("HTTP/1.1 404"), "another path is refused: {status}");

    let (status, headers, body) = get(&format!("/{name}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(header(&headers, "access-control-allow-origin"), Some("https://ui.perfetto.dev"));
    assert_eq!(body, std::fs::read(&trace).unwrap(), "the bytes served are the file's");

    let started = Instant::now();
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "open still runs after the file was fetched");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit}");
}

#[test]
fn open_refuses_a_missing_file_with_exit_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere.pftrace");
    let o = cabin_trace(&["open", "--no-browser", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("{}: cannot be read", missing.display())), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "no address for a file that cannot be served");
}

#[test]
fn open_says_plainly_when_port_9001_is_taken() {
    let _port = PORT_9001.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace.json");
    std::fs::write(&trace, "[]").unwrap();
    let _taken = std::net::TcpListener::bind("127.0.0.1:9001").expect("bind 127.0.0.1:9001 for the test");
    let o = cabin_trace(&["open", "--no-browser", "--timeout", "5", trace.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("127.0.0.1:9001 is taken"), "{}", stderr(&o));
}

#[test]
fn open_stops_after_its_timeout_when_nobody_fetches_the_file() {
    let _port = PORT_9001.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace.json");
    std::fs::write(&trace, "[]").unwrap();
    let started = Instant::now();
    let o = cabin_trace(&["open", "--no-browser", "--timeout", "1", trace.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("nobody fetched t.trace.json within 1 s"), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn chromium_lets_the_ui_s_page_read_the_served_trace_and_no_other_origin() {
    let _port = PORT_9001.lock().unwrap_or_else(|e| e.into_inner());
    let chromium = "/usr/bin/chromium";
    let install = "run scripts/install-test-tools.sh (Debian's chromium; playwright-core in tools/viewer)";
    assert!(Path::new(chromium).exists(), "{chromium} is missing: {install}");
    let viewer = root().join("tools/viewer");
    assert!(viewer.join("node_modules/playwright-core").exists(), "playwright-core is missing: {install}");
    let dir = tempfile::tempdir().unwrap();
    let trace = demo_pftrace(dir.path());
    let name = trace.file_name().unwrap().to_str().unwrap().to_string();
    let mut server = Command::new(env!("CARGO_BIN_EXE_cabin-trace"))
        .args(["open", "--no-browser", "--timeout", "60"])
        .arg(&trace)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut first).unwrap();

    let out = Command::new("node")
        .arg(viewer.join("ui_fetch_check.mjs"))
        .args(["--chromium", chromium, "--url", &format!("http://127.0.0.1:9001/{name}")])
        .args(["--origin", "https://example.com", "--origin", "https://ui.perfetto.dev"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}; {install}"));
    assert!(out.status.success(), "{}", stderr(&out));
    let results: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let other = &results[0];
    assert!(other["error"].is_string(), "another origin cannot read it: {other}");
    assert!(other["console"].to_string().contains("CORS"), "{other}");
    let ui = &results[1];
    assert_eq!(ui["status"], 200, "{ui}");
    assert_eq!(ui["bytes"], std::fs::metadata(&trace).unwrap().len(), "{ui}");

    let exit = server.wait_with_output().unwrap();
    assert!(exit.status.success(), "{}", stderr(&exit));
    assert!(stderr(&exit).contains(&format!("the Perfetto UI fetched {name}; done")), "{}", stderr(&exit));
}
