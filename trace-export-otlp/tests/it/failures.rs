//! Receivers that are down, slow, or busy: tiny loopback servers of the
//! test's own, since the point is to misbehave on cue.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;

/// What the server answers to one request.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    delay: Duration,
}

/// What the server received.
#[derive(Debug)]
struct Request {
    at: Instant,
    request_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Serves `replies` in order, one connection each, on a loopback port.
fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Request>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for reply in replies {
            let Ok((stream, _)) = listener.accept() else { return };
            let request = read_request(&stream);
            log.lock().unwrap().push(request);
            std::thread::sleep(reply.delay);
            let mut head =
                format!("HTTP/1.1 {} Status\r\nConnection: close\r\nContent-Length: 4\r\n", reply.status);
            for (k, v) in &reply.headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\nbusy");
            let _ = (&stream).write_all(head.as_bytes());
        }
    });
    (url, seen)
}

fn read_request(stream: &TcpStream) -> Request {
    let at = Instant::now();
    let mut r = BufReader::new(stream);
    let mut request_line = String::new();
    r.read_line(&mut request_line).unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').unwrap();
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len = headers.iter().find(|(k, _)| k == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    Request { at, request_line: request_line.trim_end().to_string(), headers, body }
}

fn export(args: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_otlp-export"))
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .env_remove("OTEL_EXPORTER_OTLP_TIMEOUT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .output()
        .unwrap();
    (out, started.elapsed())
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_dead_endpoint_fails_at_once_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let (out, took) = export(&["--endpoint", &endpoint, "--timeout", "3", c.otlp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{endpoint}/v1/traces")), "{}", stderr(&out));
    assert!(took < Duration::from_secs(3), "within the timeout: {took:?}");
}

#[test]
fn a_slow_receiver_fails_after_the_timeout_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let (url, seen) = serve(vec![Reply { status: 200, headers: vec![], delay: Duration::from_secs(6) }]);
    let (out, took) = export(&["--endpoint", &url, "--timeout", "1", c.timings.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("{url}/v1/metrics")) && err.contains("timeout"), "{err}");
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(4), "{took:?}");
    assert_eq!(seen.lock().unwrap().len(), 1, "a timeout is not retried");
}

#[test]
fn a_503_with_retry_after_is_retried_after_the_wait_it_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let (url, seen) = serve(vec![
        Reply { status: 503, headers: vec![("Retry-After", "1")], delay: Duration::ZERO },
        Reply { status: 200, headers: vec![], delay: Duration::ZERO },
    ]);
    let (out, _) = export(&["--endpoint", &url, c.otlp.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("after 2 attempts"), "{}", stderr(&out));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(gap >= Duration::from_millis(950), "waited as asked: {gap:?}");
    assert_eq!(seen[0].body, seen[1].body, "the same body again");
    assert_eq!(seen[1].request_line, "POST /v1/traces HTTP/1.1");
    let ct = seen[1].headers.iter().find(|(k, _)| k == "content-type").unwrap();
    assert_eq!(ct.1, "application/x-protobuf");
}

#[test]
fn retries_are_bounded_and_the_error_names_the_url_and_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let busy = || Reply { status: 503, headers: vec![("Retry-After", "0")], delay: Duration::ZERO };
    let (url, seen) = serve(vec![busy(), busy(), busy(), busy()]);
    let (out, _) = export(&["--endpoint", &url, "--retries", "2", c.otlp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains(&format!("POST {url}/v1/traces: HTTP 503 after 3 attempts")), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 3);
}

#[test]
fn a_refusal_other_than_busy_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let (url, seen) = serve(vec![
        Reply { status: 400, headers: vec![], delay: Duration::ZERO },
        Reply { status: 200, headers: vec![], delay: Duration::ZERO },
    ]);
    let (out, _) = export(&["--endpoint", &url, c.otlp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 400: `busy`"), "{}", stderr(&out));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn the_endpoint_headers_and_protocol_come_from_the_otel_variables() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let (url, seen) = serve(vec![Reply { status: 200, headers: vec![], delay: Duration::ZERO }]);
    let out = Command::new(env!("CARGO_BIN_EXE_otlp-export"))
        .arg(&c.otlp)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("{url}/"))
        .env("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cr%20t,x-team=build")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = seen.lock().unwrap();
    let header = |name: &str| seen[0].headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(header("api-key").as_deref(), Some("s3cr t"));
    assert_eq!(header("x-team").as_deref(), Some("build"));
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert_eq!(seen[0].request_line, "POST /v1/traces HTTP/1.1");
    let line = std::fs::read_to_string(&c.otlp).unwrap();
    assert_eq!(seen[0].body, line.lines().next().unwrap().as_bytes(), "the file's line, as written");
}

#[test]
fn no_endpoint_is_a_usage_error_saying_how_to_give_one() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let (out, _) = export(&[c.otlp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{}", stderr(&out));
}

#[test]
fn an_https_endpoint_without_the_tls_feature_says_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let (out, _) = export(&["--endpoint", "https://127.0.0.1:1", c.otlp.to_str().unwrap()]);
    if cfg!(feature = "tls") {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    } else {
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("https://127.0.0.1:1/v1/traces: HTTPS needs"), "{}", stderr(&out));
    }
}
