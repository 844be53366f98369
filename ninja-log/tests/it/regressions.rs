//! One test per problem the property tests or the fuzzer found, named after
//! what was found.

use ninja_log::Snapshot;

/// The log before the run: 101 builds of one output, over Ninja's
/// recompaction threshold.
fn busy(header: &str) -> Vec<u8> {
    let mut log = format!("{header}\n");
    for i in 0..101 {
        log.push_str(&format!("1\t{}\t{}\tobj/e0_0.o\t4f8b6ca408eea3fe\n", 5 + i, 1000 + i));
    }
    log.into_bytes()
}

/// Found by the property test (seeds 105 and 16522342885615256584): when a
/// recompaction drops every output as dead and the run builds nothing, only
/// the header is left, which is also what a log cut back to its header, or
/// deleted and restarted, looks like. The model had demanded "available, no
/// actions"; the reader rightly says it cannot tell.
#[test]
fn a_recompaction_that_kept_no_output_is_unavailable_rather_than_an_empty_run() {
    for (before, after) in [("# ninja log v5", "# ninja log v5\n"), ("# ninja log v6", "# ninja log v5\n")] {
        let snapshot = Snapshot::from_bytes(".ninja_log", Some(busy(before)));
        let delta = snapshot.delta_from_bytes(Some(after.as_bytes()));
        let reason = delta.reason().unwrap_or_else(|| panic!("{delta:#?}"));
        assert!(reason.contains("cut short") || reason.contains("holds only its header"), "{reason}");
    }
}
