//! The public sampler: the Linux one where it runs, a refusal elsewhere.

use std::time::Duration;

use crate::error::StacksError;
use crate::model::Stacks;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
type Inner = crate::linux::reader::LinuxSampler;
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
type Inner = std::convert::Infallible;

/// Samples the call stacks of the threads it is given, until
/// [`finish`](Sampler::finish).
///
/// A thread is sampled each time it has used `interval` more CPU time, in
/// user space only; its program is never interrupted by a signal (the kernel
/// copies the registers and the top of the stack into a buffer that one
/// reader thread of the sampler drains). Dropping a sampler without
/// finishing it stops it and discards its samples.
#[must_use = "dropping the sampler stops it and discards its samples"]
pub struct Sampler {
    inner: Inner,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler").finish_non_exhaustive()
    }
}

impl Sampler {
    /// Starts the reader and symbolizer threads, after asking the kernel
    /// once whether this process may sample itself, and returns once the
    /// reader has the process's unwind tables (waiting a second at most), so
    /// that the buffers are drained from the first sample on. No thread is
    /// sampled until it is added.
    ///
    /// Fails, saying why, on a platform without a sampler, when the kernel
    /// refuses perf events (`perf_event_paranoid` above 2, a seccomp filter),
    /// or when the interval is zero.
    pub fn start(interval: Duration) -> Result<Sampler, StacksError> {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            Inner::start(interval).map(|inner| Sampler { inner })
        }
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
        {
            let _ = interval;
            Err(StacksError::new(
                crate::error::StacksErrorKind::Unsupported,
                format!(
                    "CPU stacks: not supported on {}-{} (only Linux on x86-64 samples stacks)",
                    std::env::consts::OS,
                    std::env::consts::ARCH
                ),
            ))
        }
    }

    /// Samples thread `tid` (a `gettid` value of this process) from now on.
    /// Threads it starts are not sampled unless added too; a thread added
    /// twice is sampled twice, so add each once. The calling thread pays
    /// for opening the event and mapping its ring buffer.
    pub fn add_thread(&self, tid: u32) -> Result<(), StacksError> {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            self.inner.add_thread(tid)
        }
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
        {
            let _ = tid;
            match self.inner {}
        }
    }

    /// Samples the calling thread from now on.
    pub fn add_current_thread(&self) -> Result<(), StacksError> {
        self.add_thread(current_thread_id())
    }

    /// Stops sampling, reads what is left in the buffers, and waits until
    /// every address seen is symbolized (most were while the program ran;
    /// the time it took is in [`Stacks::symbolization_time`]).
    pub fn finish(self) -> Stacks {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            self.inner.finish()
        }
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
        {
            match self.inner {}
        }
    }
}

/// The calling thread's id as the kernel knows it (`gettid`), the id
/// [`Sampler::add_thread`] takes and [`Sample::tid`](crate::Sample::tid)
/// holds; 0 where there is no such id.
pub fn current_thread_id() -> u32 {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        crate::linux::reader::current_tid()
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        0
    }
}
