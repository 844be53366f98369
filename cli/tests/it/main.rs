//! Integration tests of the `cabin-trace` command: real processes, real files.

mod bench;
mod compare;
mod summarize;
mod support;
