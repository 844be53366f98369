//! Receivers that are down, slow, or busy: tiny loopback servers of the
//! test's own, since the point is to misbehave on cue.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use trace_export_otlp::{run_with_env, ErrorKind, Export, ExportError, Outcome, SendOptions};

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

/// Sends `files` to `endpoint` as `cabin-trace export --endpoint ENDPOINT
/// FILES...` would, with no `OTEL_*` variable set.
fn send(
    endpoint: Option<&str>,
    files: &[&Path],
    tune: impl FnOnce(&mut SendOptions),
) -> (Result<Outcome, ExportError>, Duration) {
    send_with_env(endpoint, files, tune, |_| None)
}

fn send_with_env(
    endpoint: Option<&str>,
    files: &[&Path],
    tune: impl FnOnce(&mut SendOptions),
    env: impl Fn(&str) -> Option<String>,
) -> (Result<Outcome, ExportError>, Duration) {
    let mut options = SendOptions {
        endpoint: endpoint.map(str::to_string),
        files: files.iter().map(|f| f.to_path_buf()).collect(),
        ..SendOptions::default()
    };
    tune(&mut options);
    let started = Instant::now();
    let result = run_with_env(&Export::Send(options), env);
    (result, started.elapsed())
}

fn error(result: Result<Outcome, ExportError>) -> ExportError {
    result.expect_err("the export fails")
}

#[test]
fn a_dead_endpoint_fails_at_once_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let (result, took) = send(Some(&endpoint), &[&c.otlp], |o| o.timeout = Some(Duration::from_secs(3)));
    let e = error(result);
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.to_string().contains(&format!("{endpoint}/v1/traces")), "{e}");
    assert!(took < Duration::from_secs(3), "within the timeout: {took:?}");
}

#[test]
fn a_slow_receiver_fails_after_the_timeout_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let (url, seen) = serve(vec![Reply { status: 200, headers: vec![], delay: Duration::from_secs(6) }]);
    let (result, took) = send(Some(&url), &[&c.timings], |o| o.timeout = Some(Duration::from_secs(1)));
    let e = error(result);
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    let err = e.to_string();
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
    let (result, _) = send(Some(&url), &[&c.otlp], |_| ());
    let outcome = result.unwrap();
    assert!(outcome.to_string().contains("after 2 attempts"), "{outcome}");
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
    let (result, _) = send(Some(&url), &[&c.otlp], |o| o.retries = 2);
    let e = error(result);
    assert_eq!((e.kind(), e.status()), (ErrorKind::Status, Some(503)));
    assert!(e.to_string().contains(&format!("POST {url}/v1/traces: HTTP 503 after 3 attempts")), "{e}");
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
    let (result, _) = send(Some(&url), &[&c.otlp], |_| ());
    let e = error(result);
    assert_eq!(e.status(), Some(400));
    assert!(e.to_string().contains("HTTP 400: `busy`"), "{e}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn the_endpoint_headers_and_protocol_come_from_the_otel_variables() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let (url, seen) = serve(vec![Reply { status: 200, headers: vec![], delay: Duration::ZERO }]);
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("{url}/")),
        ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cr%20t,x-team=build".to_string()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".to_string()),
    ];
    let env = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
    let (result, _) = send_with_env(None, &[&c.otlp], |_| (), env);
    result.unwrap();
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
    let e = error(send(None, &[&c.otlp], |_| ()).0);
    assert_eq!(e.kind(), ErrorKind::Usage);
    assert!(e.to_string().contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{e}");
}

#[test]
fn an_https_endpoint_without_the_tls_feature_says_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let e = error(send(Some("https://127.0.0.1:1"), &[&c.otlp], |_| ()).0);
    if cfg!(feature = "tls") {
        assert_ne!(e.kind(), ErrorKind::Usage, "{e}");
    } else {
        assert_eq!(e.kind(), ErrorKind::Usage, "{e}");
        assert!(e.to_string().contains("https://127.0.0.1:1/v1/traces: HTTPS needs"), "{e}");
    }
}
