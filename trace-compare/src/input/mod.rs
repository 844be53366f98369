//! Reading the sides of a comparison: `timings.json` files, hyperfine
//! exports, and `samples.json` (see [`crate::samples`]).

pub mod hyperfine;
pub mod timings;

use std::path::Path;

use crate::error::{Error, ErrorKind};
use crate::samples::Samples;

/// What a path holds.
#[derive(Clone, Debug)]
pub enum Input {
    /// A `samples.json` from `bench`.
    Samples(Box<Samples>),
    /// A hyperfine JSON export.
    Hyperfine(serde_json::Value),
    /// `timings.json` files (a directory of them, or one).
    Timings(Vec<std::path::PathBuf>),
}

/// Reads `path` and says what it is: a directory is a set of `timings.json`
/// files; a file is told apart by its content.
pub fn open(path: &Path) -> Result<Input, Error> {
    if path.is_dir() {
        return Ok(Input::Timings(timings::files(path)?));
    }
    let text = std::fs::read(path).map_err(|e| {
        Error::new(ErrorKind::Io, "", e.to_string(), "a readable file or directory").in_file(path)
    })?;
    let doc: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
        Error::new(
            ErrorKind::Format,
            format!("line {}, column {}", e.line(), e.column()),
            e.to_string(),
            "JSON",
        )
        .in_file(path)
    })?;
    if hyperfine::is_export(&doc) {
        return Ok(Input::Hyperfine(doc));
    }
    if doc.get("scenarios").is_some() && doc.get("labels").is_some() {
        return Samples::from_value(doc).map(|s| Input::Samples(Box::new(s))).map_err(|e| e.in_file(path));
    }
    if doc.get("spans").is_some() {
        return Ok(Input::Timings(vec![path.to_path_buf()]));
    }
    Err(Error::new(
        ErrorKind::Format,
        "",
        "a JSON document of another kind",
        "a samples.json, a hyperfine export (`results`), a timings.json (`spans`) or a directory of them",
    )
    .in_file(path))
}
