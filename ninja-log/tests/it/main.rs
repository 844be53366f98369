//! Integration tests of `ninja-log`, as one test binary.

mod differential;
mod hostile;
mod lent;
mod model;
mod props;
// Runs the Linux Ninja binaries the test set-up installs, and reads inodes.
#[cfg(unix)]
mod real_ninja;
mod reference;
mod regressions;
