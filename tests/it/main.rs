//! Integration tests of the façade: the demo as a real child process, and
//! in-process captures through the public API.

mod chrome_output;
mod demo_process;
mod faults;
mod in_process;
mod minibuild;
mod perfetto;
mod reliability;
// There is no exec on Windows, and no process figure is read there.
#[cfg(unix)]
mod resources;
mod summary;
mod support;
