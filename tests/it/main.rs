//! Integration tests of the façade: the demo as a real child process, and
//! in-process captures through the public API.

// Reads the `.pftrace` with the official schema's decoders (Linux).
#[cfg(unix)]
mod async_tracks;
mod chrome_output;
// Reads the `.pftrace` with the official schema's decoders (Linux).
#[cfg(unix)]
mod cross_thread;
mod demo_process;
// Real Ninja, a C compiler and the official schema's decoders (Linux).
#[cfg(unix)]
mod family;
mod faults;
mod in_process;
mod logging;
// Real Ninja (the Linux binaries the test set-up installs) and a C compiler.
#[cfg(unix)]
mod minibuild;
// The official OpenTelemetry classes and receiver of the test set-up (Linux).
#[cfg(unix)]
mod otlp;
// The official schema's decoders: the Linux Python and protoc of the test set-up.
#[cfg(unix)]
mod perfetto;
mod reliability;
// There is no exec on Windows, and no process figure is read there.
#[cfg(unix)]
mod resources;
// The official schema's decoders and the JSON Schema validator (Linux).
#[cfg(unix)]
mod samples;
// perf events, Perfetto's trace processor and speedscope in Chromium (Linux),
// and the `stacks` feature (default).
#[cfg(all(target_os = "linux", target_arch = "x86_64", feature = "stacks"))]
mod stacks;
mod summary;
mod support;
// Perfetto's trace processor, installed by the test set-up (Linux).
#[cfg(unix)]
mod trace_processor;
// speedscope in Debian's Chromium (Linux).
#[cfg(unix)]
mod viewer;
