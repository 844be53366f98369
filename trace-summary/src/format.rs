//! The on-disk format's constants.

/// The format version this crate writes and reads. Bumped with every change of
/// meaning of a field.
pub const FORMAT_VERSION: u32 = 3;

/// The oldest format version [`crate::Timings::from_path`] reads: format 3
/// only adds `stacks` to format 2.
pub const OLDEST_READ_VERSION: u32 = 2;

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

/// `startup_since` and `resources.self_max_rss_since` when the figure counts
/// from the start of the tool's image (its exec).
pub const SINCE_IMAGE_START: &str = "image_start";
/// `startup_since` and `resources.self_max_rss_since` when the figure counts
/// from the creation of the tool's process, before any exec.
pub const SINCE_PROCESS_CREATION: &str = "process_creation";

/// `stacks.status` when `<P>_TRACE_STACKS` was unset or `off`.
pub const STACKS_OFF: &str = "off";
/// `stacks.status` when stacks were sampled.
pub const STACKS_ON: &str = "on";
/// `stacks.status` when stacks were asked for and could not be sampled.
pub const STACKS_UNAVAILABLE: &str = "unavailable";
