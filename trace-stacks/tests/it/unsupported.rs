use std::time::Duration;

#[test]
fn starting_a_sampler_here_is_refused_as_unsupported() {
    let error = trace_stacks::Sampler::start(Duration::from_millis(1)).unwrap_err();
    assert_eq!(error.kind(), trace_stacks::StacksErrorKind::Unsupported);
    assert!(error.to_string().contains("not supported"), "{error}");
}
