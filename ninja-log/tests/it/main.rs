//! Integration tests of `ninja-log`, as one test binary.

mod differential;
mod hostile;
mod lent;
mod model;
mod props;
mod real_ninja;
mod reference;
mod regressions;
