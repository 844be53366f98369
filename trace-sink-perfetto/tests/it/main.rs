//! Integration tests of the Perfetto sink: real captures through the engine,
//! checked with Perfetto's official schema (install it with
//! `scripts/install-perfetto.sh`; a test fails, never skips, without it).

mod broken;
mod capture;
mod failure;
mod loss;
mod pieces;
mod processes;
mod size;
mod support;
mod thread_cpu;
