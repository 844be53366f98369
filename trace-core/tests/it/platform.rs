//! The platform module as a binary that links trace-core sees it.

use trace_core::os;
#[cfg(any(target_os = "linux", target_vendor = "apple"))]
use trace_core::Since;

/// On Linux and macOS the constructor that records the image start must be in
/// every binary that uses the crate: a linker drops an object of a static
/// library that nothing refers to, and the figures would fall back to the
/// process's creation (or to nothing) without a word.
#[cfg(any(target_os = "linux", target_vendor = "apple"))]
#[test]
fn the_image_start_constructor_is_kept_in_a_binary_that_links_the_crate() {
    assert_eq!(os::startup_since(), Some(Since::ImageStart));
    assert_eq!(os::startup_resolution_us(), 1);
    let first = os::startup_us().expect("the image start was recorded");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let second = os::startup_us().unwrap();
    assert!(second >= first + 20_000, "{first} µs then {second} µs: the figure counts from a fixed start");
}

/// The image started after the process was created and before this test ran.
#[cfg(target_os = "linux")]
#[test]
fn the_image_start_lies_between_the_process_creation_and_now() {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let start_ticks: u64 = rest.split_whitespace().nth(19).unwrap().parse().unwrap();
    // SAFETY: sysconf and clock_gettime have no preconditions beyond valid pointers.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    let process_age_us =
        (ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000) - start_ticks * 1_000_000 / hz;
    let since_image_us = os::startup_us().unwrap();
    let tick_us = 1_000_000 / hz;
    assert!(
        since_image_us <= process_age_us + tick_us,
        "image started {since_image_us} µs ago, but the process only {process_age_us} µs ago"
    );
}

#[test]
fn process_figures_are_read_or_their_absence_is_stated() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        trace_core::Config::from_lookup("P", &[], |n| (n == "P_TRACE_DIR").then(|| dir.path().into()))
            .unwrap()
            .unwrap();
    let resources = std::sync::Arc::new(parking_lot::Mutex::new(None));
    struct Keep(std::sync::Arc<parking_lot::Mutex<Option<trace_core::Resources>>>);
    impl trace_core::Sink for Keep {
        fn name(&self) -> &'static str {
            "keep"
        }
        fn suffix(&self) -> &'static str {
            "keep"
        }
        fn event(&mut self, _: &trace_core::Event<'_>, _: &mut dyn std::io::Write) -> std::io::Result<()> {
            Ok(())
        }
        fn finish(
            &mut self,
            end: &trace_core::Finish<'_>,
            _: &mut dyn std::io::Write,
        ) -> std::io::Result<()> {
            *self.0.lock() = Some(end.resources);
            Ok(())
        }
    }
    let session = trace_core::Session::start(&config, "p", vec![Box::new(Keep(resources.clone()))]).unwrap();
    session.in_scope(|| {
        // Some CPU (tens of milliseconds), so that a platform that reads it has something to read.
        let mut x = 1u64;
        for _ in 0..20_000_000 {
            x = std::hint::black_box(x ^ (x << 13) ^ (x >> 7));
        }
    });
    assert!(session.finish().is_complete());
    let r = resources.lock().take().expect("the sink was finished");
    match os::missing() {
        None => {
            assert!(r.self_user_us.unwrap() + r.self_system_us.unwrap() >= 5_000, "{r:?}");
            assert!(r.self_max_rss_kib.unwrap() > 0, "{r:?}");
            assert_eq!(r.waited_children, Some(0));
            assert!(r.pre_exec_user_us.is_some() && r.startup_user_us.is_some(), "{r:?}");
        }
        Some(why) => {
            assert!(why.contains("not read"), "{why}");
            assert_eq!(r, trace_core::Resources::default(), "nothing is invented where nothing is read");
            assert_eq!((os::startup_us(), os::startup_since()), (None, None));
        }
    }
}
