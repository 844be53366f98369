//! The sampler on Linux x86-64: perf events, their reader thread, unwinding
//! and symbolization.

mod object_symbols;
mod perf_event;
mod proc_maps;
pub(crate) mod reader;
mod symbols;
mod unwinding;
