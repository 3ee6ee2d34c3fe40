//! The render threads' scheduling priority: below the front's, so the control plane (MCP
//! requests, uploads, downloads, `/healthz`) is scheduled first when both want the CPUs.
//!
//! Linux keeps the nice value per thread, and a thread inherits its creator's: a render worker
//! lowers its own once, at its start, and every thread it then starts (the pipeline's decode,
//! compose and encode stages, FFmpeg's and the encoders' own threads) runs at the same nice
//! value. The front's threads (tokio's) keep 0. On an otherwise idle machine a nice render runs
//! as fast as before: nice only decides who runs first when both are ready.

/// Sets the calling thread's nice value to `nice` (`0`: leave it). A failure (a container
/// without the right, an OS that keeps nice per process) is logged, never fatal.
pub fn lower_this_thread(nice: u8) {
    if nice == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid takes no arguments; setpriority takes plain integers.
        let (tid, rc) = unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            (
                tid,
                libc::setpriority(libc::PRIO_PROCESS, tid, i32::from(nice)),
            )
        };
        if rc != 0 {
            let error = std::io::Error::last_os_error();
            tracing::warn!(tid, nice, %error, "cannot lower the render thread's priority");
        }
    }
}

/// The calling thread's nice value (Linux; `None` elsewhere or on error).
pub fn this_thread_nice() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: as above. getpriority may return -1 legitimately: errno tells.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            *libc::__errno_location() = 0;
            let nice = libc::getpriority(libc::PRIO_PROCESS, tid);
            (*libc::__errno_location() == 0).then_some(nice)
        }
    }
    #[cfg(not(target_os = "linux"))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_lowers_only_itself_and_its_children_inherit() {
        let before = this_thread_nice().unwrap();
        let (own, child) = std::thread::spawn(|| {
            lower_this_thread(7);
            let own = this_thread_nice().unwrap();
            let child = std::thread::spawn(|| this_thread_nice().unwrap())
                .join()
                .unwrap();
            (own, child)
        })
        .join()
        .unwrap();
        assert_eq!(own, (before + 7).min(19).max(before));
        assert_eq!(
            child, own,
            "a thread started by a render thread inherits its nice value"
        );
        assert_eq!(
            this_thread_nice().unwrap(),
            before,
            "the other threads keep theirs"
        );
    }
}
