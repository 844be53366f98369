//! Integration tests of `ninja-log`, as one test binary.

mod hostile;
mod model;
mod props;
mod real_ninja;
mod regressions;
