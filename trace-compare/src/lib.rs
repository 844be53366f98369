//! Did a change make a command faster or slower: two sets of runs compared
//! metric by metric, each with a rule that says when a difference is real.
//!
//! # Overview
//!
//! - [`input`] reads a side: `timings.json` files (one run each), a hyperfine
//!   JSON export, or one label of a [`samples::Samples`] file that
//!   `cabin-trace bench` writes. Each becomes a [`Side`] of [`Group`]s (a
//!   scenario or command) of [`Run`]s, each run a value per [`Metric`].
//! - [`compare()`] compares every metric both sides have and gives a
//!   [`Report`], one [`Row`] per metric:
//!   - **Unpaired rule** (any two sides): a difference is real only when a
//!     two-sided Mann-Whitney U test rejects at 1% AND the medians are apart
//!     by more than the larger of the two interquartile ranges, in the
//!     metric's own units. A real difference is Regressed / Improved past the
//!     [`Policy`] (a minimum effect in percent of the baseline and a floor per
//!     kind: 2 ms, 1 MiB, 1e6 instructions), else Increased / Decreased.
//!   - **Paired rule** (two labels of one `bench` session, whose runs came in
//!     randomized blocks): the geometric mean of the per-block ratios
//!     head/base, an exact two-sided sign-flip p-value over all `2^n` sign
//!     assignments of the log-ratios (a Monte Carlo from a recorded seed past
//!     20 blocks), and a simultaneous interval for a family of `m`
//!     comparisons (Bonferroni) found by inverting that test. By default the
//!     family is every timed comparison the report makes ([`Family`]),
//!     counted from which metrics exist before any value is read. Its
//!     verdicts are regression detected, improvement detected or
//!     inconclusive: a result that is not significant is never parity.
//!   - **Work counters** (span counts, integer field sums, Ninja actions) are
//!     deterministic: constant on both sides and different is a change of the
//!     work done, whatever the clock says. A span metric on one side only is a
//!     change of instrumentation, not a regression.
//! - [`stats`] holds the arithmetic, written out by hand so that each step can
//!   be checked against SciPy and numpy (the tests do, to 1e-12): statrs's
//!   exact Mann-Whitney path returns p = 1 whenever `n1 <= n2`, and `hypors`
//!   has only the normal approximation. The Mann-Whitney test follows SciPy's
//!   `mannwhitneyu(method="auto")`: exact when one side has at most 8 samples
//!   and there are no ties, else the normal approximation with tie and
//!   continuity corrections. Medians and quartiles are numpy's default
//!   (linear) percentiles.
//!
//! # Example
//!
//! ```
//! use trace_compare::{compare, Group, Kind, Metric, Options, Run, Side, Verdict};
//!
//! let side = |label: &str, walls: &[f64]| Side {
//!     label: label.into(),
//!     groups: vec![Group {
//!         name: "build".into(),
//!         runs: walls
//!             .iter()
//!             .map(|&w| Run { block: None, values: [(Metric::new("wall", Kind::Time), w)].into() })
//!             .collect(),
//!         invalid: vec![],
//!     }],
//!     ..Side::default()
//! };
//! let base = side("base", &[50.1, 50.3, 49.8, 50.0, 50.2, 50.4]);
//! let head = side("head", &[60.2, 60.0, 59.9, 60.5, 60.1, 60.3]);
//! let report = compare(&base, &head, &Options::default()).unwrap();
//! let row = &report.groups[0].rows[0];
//! assert_eq!(row.verdict, Verdict::Regressed);
//! assert!(row.unpaired.as_ref().unwrap().p < 0.01);
//! ```
//!
//! # What it does not do
//!
//! It runs nothing: `cabin-trace bench` (the `cabin-trace-cli` package) runs
//! the commands and writes `samples.json`. It does not correct across the
//! unpaired rows (each is tested at its own level). A gate should decide on a
//! few primary metrics declared in advance ([`Report::gate_failures`]), not on
//! every row: the other rows say where a change went.
//! Load that drifts between two blocks of runs moves every sample of one side,
//! which no statistic can tell from a real change: only interleaving does.

#![deny(missing_docs)]

pub mod compare;
mod error;
pub mod input;
mod metric;
pub mod rules;
pub mod samples;
pub mod stats;

pub use compare::{compare, Family, GroupReport, Report, Row, SideInfo, REPORT_FORMAT_VERSION};
pub use error::{Error, ErrorKind};
pub use metric::{Group, Kind, Metric, Run, Side};
pub use rules::{Options, Policy, Verdict};
