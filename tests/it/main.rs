//! Integration tests of the façade: the demo as a real child process, and
//! in-process captures through the public API.

mod chrome_output;
mod cross_thread;
mod demo_process;
mod family;
mod faults;
mod in_process;
mod logging;
mod minibuild;
mod otlp;
mod perfetto;
mod reliability;
mod summary;
mod support;
mod viewer;
