//! The statistics, by hand: exact arithmetic whose every step is stated, so it
//! can be checked against SciPy and numpy to the last few bits.
//!
//! These functions take finite, non-empty input; [`crate::rules`] checks that
//! and refuses anything else with an error.

pub mod mwu;
pub mod normal;
pub mod quantile;
pub mod rng;
pub mod signflip;

pub use mwu::{mann_whitney_u, MannWhitney, Method};
pub use quantile::{quantile_sorted, Spread};
pub use rng::SplitMix64;
pub use signflip::{sign_flip, smallest_p, Enumeration, SignFlip};
