//! Integration tests of the export: real captures, the official OpenTelemetry
//! classes as decoder, a real collector (rotel) as receiver, and small
//! loopback servers of our own for the receivers that misbehave.

mod bodies;
mod failures;
mod receiver;
mod support;
