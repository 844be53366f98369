//! Integration tests of trace-compare.

mod properties;
mod readers;
mod reference;
mod rules;
