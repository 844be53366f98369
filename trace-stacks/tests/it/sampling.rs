//! Threads that burn CPU in a known function, sleep, or are gone, sampled at
//! 1 ms. Neither a debug nor a release build keeps frame pointers (rustc's
//! default on x86-64 Linux), so a stack unwound to the thread's start here
//! was unwound from `.eh_frame`, in `cargo test -p trace-stacks` as in
//! `cargo test --release -p trace-stacks`.

use std::thread;
use std::time::Duration;

use trace_stacks::{current_thread_id, Sample, Sampler, Stacks, StacksErrorKind};

pub(crate) const INTERVAL: Duration = Duration::from_millis(1);
/// 100 ms of the thread's CPU time, not of the wall clock: on a loaded
/// machine a thread may get a fraction of a core.
pub(crate) const BURN_CPU_NS: u64 = 100_000_000;

pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(clock, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Spins until the thread has used `cpu_ns` of CPU. The loop calls nothing
/// (not even in a debug build), so the samples land in this function.
#[inline(never)]
pub(crate) fn burn_in_this_function(cpu_ns: u64) -> u64 {
    let start = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    loop {
        let mut i = 0u64;
        while i < 100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x ^= i;
            i += 1;
        }
        if clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start >= cpu_ns {
            return x;
        }
    }
}

#[inline(never)]
pub(crate) fn caller_of_the_burn(cpu_ns: u64) -> u64 {
    std::hint::black_box(burn_in_this_function(cpu_ns))
}

/// A thread's id and the monotonic times around its whole sampled life.
pub(crate) struct Sampled {
    pub(crate) tid: u32,
    pub(crate) from_ns: u64,
    pub(crate) to_ns: u64,
}

/// Runs `work` on a new thread that the sampler samples.
pub(crate) fn run_sampled(sampler: &Sampler, work: impl FnOnce() + Send) -> Sampled {
    let from_ns = monotonic_ns();
    let tid = thread::scope(|scope| {
        scope
            .spawn(|| {
                sampler.add_current_thread().expect("sampling this thread");
                work();
                current_thread_id()
            })
            .join()
            .unwrap()
    });
    Sampled { tid, from_ns, to_ns: monotonic_ns() }
}

fn function<'a>(stacks: &'a Stacks, sample: &Sample, depth: usize) -> &'a str {
    sample.frames.get(depth).map_or("", |&i| stacks.frames[i as usize].function.as_str())
}

fn print_folded(stacks: &Stacks) {
    let mut folded = Vec::new();
    stacks.write_folded(&mut folded, |_, _| Vec::new()).unwrap();
    println!("{}", String::from_utf8_lossy(&folded));
    println!(
        "counts: {:?}, {} frames, {} mappings, symbolized in {:?}, reader CPU {:?}",
        stacks.counts,
        stacks.frames.len(),
        stacks.mappings.len(),
        stacks.symbolization_time,
        stacks.reader_cpu_time
    );
}

#[test]
fn a_thread_burning_100ms_of_cpu_holds_80_samples_mostly_in_the_burning_function_under_its_caller() {
    let sampler = Sampler::start(INTERVAL).unwrap();
    let burner = run_sampled(&sampler, || {
        caller_of_the_burn(BURN_CPU_NS);
    });
    let stacks = sampler.finish();
    print_folded(&stacks);
    let samples: Vec<&Sample> = stacks.samples.iter().filter(|s| s.tid == burner.tid).collect();
    assert!(samples.len() >= 80, "{} samples of 100 ms of CPU at 1 ms", samples.len());
    let in_burn = samples
        .iter()
        .filter(|s| {
            function(&stacks, s, 0).ends_with("::burn_in_this_function")
                && function(&stacks, s, 1).ends_with("::caller_of_the_burn")
        })
        .count();
    assert!(
        in_burn * 100 >= samples.len() * 80,
        "{in_burn} of {} samples have burn_in_this_function on top of its caller",
        samples.len()
    );
    let leaf = &stacks.frames[samples.iter().find(|s| s.unwound).unwrap().frames[0] as usize];
    assert!(
        leaf.file.as_deref().is_some_and(|f| f.ends_with("sampling.rs")) && leaf.line.is_some(),
        "the leaf has its source line: {leaf:?}"
    );
}

#[test]
fn a_thread_sleeping_100ms_holds_at_most_5_samples() {
    let sampler = Sampler::start(INTERVAL).unwrap();
    let sleeper = run_sampled(&sampler, || thread::sleep(Duration::from_millis(100)));
    let stacks = sampler.finish();
    let samples = stacks.samples.iter().filter(|s| s.tid == sleeper.tid).count();
    assert!(samples <= 5, "{samples} samples of a thread that slept 100 ms");
}

#[test]
fn every_sample_lies_on_a_sampled_thread_within_its_life_and_95_percent_unwind_to_its_start() {
    let sampler = Sampler::start(INTERVAL).unwrap();
    let (first, second) = thread::scope(|scope| {
        let first = scope.spawn(|| {
            run_sampled(&sampler, || {
                caller_of_the_burn(BURN_CPU_NS / 2);
            })
        });
        let second = scope.spawn(|| {
            run_sampled(&sampler, || {
                caller_of_the_burn(BURN_CPU_NS / 2);
            })
        });
        (first.join().unwrap(), second.join().unwrap())
    });
    let stacks = sampler.finish();
    print_folded(&stacks);
    assert!(stacks.counts.taken >= 80, "{:?}", stacks.counts);
    assert_eq!(stacks.counts.taken, stacks.samples.len() as u64);
    for sample in &stacks.samples {
        let thread = [&first, &second].into_iter().find(|t| t.tid == sample.tid);
        let Some(thread) = thread else { panic!("a sample of thread {}, never added", sample.tid) };
        assert!(
            (thread.from_ns..=thread.to_ns).contains(&sample.time_ns),
            "sample at {} outside its thread's life {}..{}",
            sample.time_ns,
            thread.from_ns,
            thread.to_ns
        );
    }
    let unwound: Vec<&Sample> = stacks.samples.iter().filter(|s| s.unwound).collect();
    assert!(
        unwound.len() * 100 >= stacks.samples.len() * 95,
        "{} of {} samples unwound to the thread's start",
        unwound.len(),
        stacks.samples.len()
    );
    assert_eq!(stacks.counts.not_unwound, (stacks.samples.len() - unwound.len()) as u64);
    // A whole stack holds the start of a Rust thread (a sample may land in
    // it before or after the closure run_sampled gave the thread).
    for sample in unwound {
        let names: Vec<&str> = (0..sample.frames.len()).map(|d| function(&stacks, sample, d)).collect();
        assert!(names.iter().any(|n| n.ends_with("::thread_start")), "{names:?}");
    }
}

#[test]
fn adding_a_thread_that_has_exited_is_refused_naming_it() {
    let sampler = Sampler::start(INTERVAL).unwrap();
    let gone = thread::spawn(current_thread_id).join().unwrap();
    let error = sampler.add_thread(gone).unwrap_err();
    assert_eq!(error.kind(), StacksErrorKind::NoSuchThread, "{error}");
    assert!(error.to_string().contains(&format!("thread {gone}")), "{error}");
    assert_eq!(sampler.finish().counts.taken, 0);
}

#[test]
fn adding_a_thread_of_another_process_is_refused() {
    let sampler = Sampler::start(INTERVAL).unwrap();
    let error = sampler.add_thread(1).unwrap_err();
    assert_eq!(error.kind(), StacksErrorKind::NoSuchThread, "{error}");
    assert!(error.to_string().contains("no thread 1 in this process"), "{error}");
}

/// Refuses `perf_event_open` (`EACCES`) to the calling thread and the threads
/// it starts from now on, as a container's seccomp profile does.
fn refuse_perf_events_to_this_thread() {
    let stmt = |code: u32, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf: 0, k };
    let mut program = [
        // The system call's number is the first word of `seccomp_data`.
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_perf_event_open as u32,
        },
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ERRNO | libc::EACCES as u32),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
    // SAFETY: `prog` points at a valid filter program for the duration of the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0, "PR_SET_NO_NEW_PRIVS");
        assert_eq!(
            libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog),
            0,
            "PR_SET_SECCOMP"
        );
    }
}

#[test]
fn under_a_seccomp_filter_the_sampler_does_not_start_and_says_why() {
    // The filter binds this thread only, not the other tests'.
    let error = thread::spawn(|| {
        refuse_perf_events_to_this_thread();
        Sampler::start(INTERVAL).unwrap_err()
    })
    .join()
    .unwrap();
    assert_eq!(error.kind(), StacksErrorKind::Refused, "{error}");
    assert!(error.to_string().contains("a seccomp filter is active"), "{error}");
}

#[test]
fn the_reader_sleeps_while_its_threads_are_gone() {
    let sampler = Sampler::start(INTERVAL).unwrap();
    run_sampled(&sampler, || {
        caller_of_the_burn(BURN_CPU_NS / 10);
    });
    // The thread has exited: its event reports a hang-up, which the reader
    // must stop waiting on rather than wake for again and again.
    thread::sleep(Duration::from_millis(300));
    let stacks = sampler.finish();
    assert!(stacks.counts.taken >= 5, "{:?}", stacks.counts);
    assert!(
        // About 6 ms here (reading the objects' unwind sections, then the
        // samples); a reader that polls a hung-up event spins instead.
        stacks.reader_cpu_time < Duration::from_millis(40),
        "the reader used {:?} of CPU in 300 ms of waiting",
        stacks.reader_cpu_time
    );
}

/// Recurses `depth` times with 4 KiB of stack each, then burns.
#[inline(never)]
fn deep(depth: u32, cpu_ns: u64) -> u64 {
    let mut page = [0u8; 4096];
    page[depth as usize % 4096] = depth as u8;
    let page = std::hint::black_box(page);
    let below = if depth == 0 { caller_of_the_burn(cpu_ns) } else { deep(depth - 1, cpu_ns) };
    std::hint::black_box(below ^ u64::from(page[7]))
}

#[test]
fn a_stack_deeper_than_the_copy_keeps_its_top_and_is_counted_as_not_unwound() {
    let sampler = Sampler::start(INTERVAL).unwrap();
    // 80 KiB of stack below the burn, more than the 32 KiB each sample copies.
    let deep_thread = run_sampled(&sampler, || {
        deep(20, BURN_CPU_NS / 4);
    });
    let stacks = sampler.finish();
    let samples: Vec<&Sample> = stacks.samples.iter().filter(|s| s.tid == deep_thread.tid).collect();
    assert!(samples.len() >= 20, "{} samples", samples.len());
    let cut = samples.iter().filter(|s| !s.unwound).count();
    assert!(cut * 100 >= samples.len() * 95, "{cut} of {} samples cut", samples.len());
    assert_eq!(stacks.counts.not_unwound, stacks.samples.iter().filter(|s| !s.unwound).count() as u64);
    let on_top = samples
        .iter()
        .filter(|s| {
            function(&stacks, s, 0).ends_with("::burn_in_this_function")
                && function(&stacks, s, 2).ends_with("::deep")
        })
        .count();
    assert!(on_top * 100 >= samples.len() * 80, "{on_top} of {} keep burn over deep", samples.len());
}
