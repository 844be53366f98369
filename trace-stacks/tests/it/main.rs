//! The sampler against real threads of this test process.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod perfetto;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod sampling;
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod unsupported;
