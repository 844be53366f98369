//! Integration tests of the `cabin-trace` command: real processes, real files.

mod bench;
mod compare;
mod export;
mod merge;
mod summarize;
mod support;
