//! The process's C allocator (glibc malloc, used by FFmpeg, x264, libvpx and Rust alike).
//!
//! - [`limit_arenas`]: glibc gives each thread that contends for the allocator an arena of its
//!   own, up to 8 per core, and reserves 64 MiB of address space for each. The encoders'
//!   threads made a server that renders one 720p video reserve about 1.7 GB of address space
//!   (it used far less), so a container capped at 1.5 GiB of address space failed every
//!   render. [`MAX_ARENAS`] arenas keep the reservation small at no measured cost in speed
//!   (docs/reliability.md, the memory table). `MALLOC_ARENA_MAX` in the environment still
//!   wins.
//! - [`release_freed_memory`]: hands freed memory back to the OS after a render.

/// Arenas when `MALLOC_ARENA_MAX` is not set.
pub const MAX_ARENAS: i32 = 2;

/// Caps glibc's malloc arenas at [`MAX_ARENAS`] unless `MALLOC_ARENA_MAX` is set. Call it
/// first thing in `main`, before other threads start.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes a tuning parameter of glibc's allocator; it takes no
        // pointers. M_ARENA_MAX applies to arenas created from now on.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MAX_ARENAS);
        }
    }
}

/// Hands memory the render freed back to the OS. The encoders' threads leave glibc malloc
/// arenas full of freed blocks that RSS keeps counting (VP9 most: an idle server stayed near
/// 470 MiB after webm renders); trimming after each render brings it back down.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas; it takes
    // no pointers and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
