//! How the capsule process asks its allocator to give memory back. A capsule reads bodies of
//! up to tens of megabytes and drops them a moment later; what matters is that the memory goes
//! back to the system when they are dropped, not only that nothing keeps them.
//!
//! glibc's malloc serves a request of 128 KiB or more with its own mapping, returned to the
//! system on free — until the first such mapping is freed: then its threshold rises to that
//! mapping's size (up to 32 MiB), and from then on a 20 MB body is carved out of an arena's
//! heap, which can only shrink from its top. Measured on the hostile-load test
//! (`tests/memory.rs`): 10 MB before, 70 MB resident after, for good. Fixing the threshold at
//! its default turns the adjustment off: every large buffer is a mapping of its own and is
//! unmapped when dropped (the same test ends 7 MB above where it started). The cost is an
//! mmap and a munmap per large buffer, which is nothing beside parsing it.

/// The size from which an allocation is its own mapping: glibc's default, now fixed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 << 10;

/// Call once, before the runtime starts its threads.
pub fn give_large_frees_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a malloc parameter; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// How often the capsule hands the free pages inside its heaps back to the system.
pub const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Returns whole free pages inside malloc's heaps to the system. Freeing only shrinks a heap
/// from its top: after a burst of requests, pages in the middle stay resident though nothing
/// lives on them, between the small allocations that outlive the burst (the tasks a registry
/// keeps). Measured after the side-by-side load (BENCHMARKS.md): see there.
pub fn give_back_free_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes malloc's own locks; it frees nothing that is in use.
    unsafe {
        libc::malloc_trim(0);
    }
}
