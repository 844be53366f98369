//! A real OpenTelemetry collector as the receiver: rotel (Streamfold's
//! collector, written in Rust; its PyPI wheel ships the `rotel-agent` binary),
//! bound to loopback, logging every span and data point it accepts. The tests
//! read those back.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use trace_export_otlp::{run_with_env, Encoding, Export, SendOptions};

use crate::support::*;

/// A running rotel, stopped when dropped.
struct Rotel {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn rotel_agent() -> PathBuf {
    let out = Command::new(python())
        .args(["-c", "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))"])
        .output()
        .unwrap();
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(
        out.status.success() && path.exists(),
        "rotel is missing from .tools/py: run scripts/install-test-tools.sh ({})",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn start_rotel(dir: &Path) -> Rotel {
    let (http, grpc) = (free_port(), free_port());
    let log = dir.join("rotel.out");
    let child = Command::new(rotel_agent())
        .arg("start")
        .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
        .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
        .args(["--exporter", "blackhole", "--debug-log", "traces", "--debug-log", "metrics"])
        .args(["--debug-log-verbosity", "detailed"])
        .arg("--pid-file")
        .arg(dir.join("rotel.pid"))
        .arg("--log-file")
        .arg(dir.join("rotel.log"))
        .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .expect("start rotel-agent");
    let rotel = Rotel { child, url: format!("http://127.0.0.1:{http}"), log };
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect(("127.0.0.1", http)).is_err() {
        assert!(Instant::now() < deadline, "rotel did not listen on {} within 15 s", rotel.url);
        std::thread::sleep(Duration::from_millis(50));
    }
    rotel
}

/// Waits until rotel's log holds every one of `needles`, and returns it.
fn read_back(rotel: &Rotel, needles: &[String]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&rotel.log).unwrap_or_default();
        if needles.iter().all(|n| text.contains(n.as_str())) {
            return text;
        }
        let missing: Vec<&String> = needles.iter().filter(|n| !text.contains(n.as_str())).collect();
        assert!(Instant::now() < deadline, "rotel's log lacks {missing:?}:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a capture's spans look like in rotel's log: ids and names.
fn expected_spans(otlp: &Path) -> Vec<String> {
    let decoded = check(&["json".as_ref(), otlp.as_os_str()]);
    let mut out = Vec::new();
    for s in decoded["spans"].as_array().unwrap() {
        out.push(format!("ID             : {}", s["span_id"].as_str().unwrap()));
        out.push(format!("Name           : {}", s["name"].as_str().unwrap()));
        out.push(format!("Trace ID       : {}", s["trace_id"].as_str().unwrap()));
    }
    out
}

fn send_and_read_back(json: bool) {
    let dir = tempfile::tempdir().unwrap();
    let rotel = start_rotel(dir.path());
    let c = capture(dir.path(), "build");
    let options = SendOptions {
        endpoint: Some(rotel.url.clone()),
        encoding: json.then_some(Encoding::Json),
        files: vec![c.otlp.clone(), c.timings.clone()],
        ..SendOptions::default()
    };
    let outcome = run_with_env(&Export::Send(options), |_| None).unwrap().to_string();
    assert!(outcome.contains(&format!("{}/v1/traces (HTTP 200", rotel.url)), "{outcome}");
    assert!(outcome.contains(&format!("{}/v1/metrics (HTTP 200", rotel.url)), "{outcome}");

    let mut needles = expected_spans(&c.otlp);
    needles.extend(
        ["cabin_trace.command.duration", "cabin_trace.phase.count", "{span}", "service.name: Str(build)"]
            .map(String::from),
    );
    let log = read_back(&rotel, &needles);
    assert!(log.contains("requests: Int(3)"), "span attributes arrive typed:\n{log}");
}

#[test]
fn a_capture_and_its_metrics_reach_a_real_collector_as_protobuf_and_are_read_back() {
    send_and_read_back(false);
}

#[test]
fn a_capture_and_its_metrics_reach_a_real_collector_as_otlp_json_and_are_read_back() {
    send_and_read_back(true);
}
