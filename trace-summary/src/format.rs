//! The on-disk format's constants.

/// The format version this crate writes and reads. Bumped with every change of
/// meaning of a field.
pub const FORMAT_VERSION: u32 = 2;

/// The file name after the stem.
pub const SUFFIX: &str = "timings.json";

/// The sink's name.
pub const NAME: &str = "summary";

/// `ninja.status` when the command ran no Ninja.
pub const NINJA_NOT_RUN: &str = "not_run";
/// `ninja.status` when the run's actions were read.
pub const NINJA_AVAILABLE: &str = "available";
/// `ninja.status` when the run's actions could not be read.
pub const NINJA_UNAVAILABLE: &str = "unavailable";
