//! Integration tests of the `cabin-trace` command: real processes, real files.

mod bench;
mod compare;
mod export;
mod merge;
mod open;
mod report;
mod summarize;
mod support;
