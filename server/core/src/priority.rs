//! The render threads' scheduling priority: below the front's, so the control plane (MCP
//! requests, uploads, downloads, `/healthz`) is scheduled first when both want the CPUs.
//!
//! Linux keeps the nice value per thread, and a thread inherits its creator's: a render worker
//! lowers its own once, at its start, and every thread it then starts (the pipeline's decode,
//! compose and encode stages, FFmpeg's and the encoders' own threads) runs at the same nice
//! value. The front's threads (tokio's) keep 0. On an otherwise idle machine a nice render runs
//! as fast as before: nice only decides who runs first when both are ready. `SCHED_BATCH`
//! (the default `render_sched`) also keeps a waking render thread from preempting the front;
//! `SCHED_IDLE` runs renders only on CPU time nothing else wants (docs/bench/front-priority.md).

use crate::config::RenderSched;

/// Lowers the calling thread's priority: `policy` (`SCHED_BATCH` or `SCHED_IDLE` unless
/// `normal`) and nice value `nice`, or the thread's own if that is lower already (`0`: left as
/// it is). A failure (a container without the
/// right, an OS that keeps nice per process) is logged, never fatal.
pub fn lower_this_thread(policy: RenderSched, nice: u8) {
    #[cfg(target_os = "linux")]
    {
        let policy_id = match policy {
            RenderSched::Normal => None,
            RenderSched::Batch => Some(libc::SCHED_BATCH),
            RenderSched::Idle => Some(libc::SCHED_IDLE),
        };
        // SAFETY: gettid takes no arguments; sched_setscheduler reads a valid sched_param;
        // setpriority takes plain integers. Both act on this thread alone (Linux keeps the
        // policy and the nice value per thread).
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::pid_t;
            if let Some(id) = policy_id {
                let param = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(tid, id, &param) != 0 {
                    let error = std::io::Error::last_os_error();
                    tracing::warn!(tid, policy = policy.as_str(), %error, "cannot set the render thread's scheduling policy");
                }
            }
            // Never above what the process was started with (`nice -n 15 vidforge serve`).
            let target = i32::from(nice).max(this_thread_nice().unwrap_or(0));
            if nice != 0 && libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, target) != 0 {
                let error = std::io::Error::last_os_error();
                tracing::warn!(tid, nice, %error, "cannot lower the render thread's priority");
            }
        }
    }
}

/// The calling thread's scheduling policy (Linux; `None` elsewhere or on error).
pub fn this_thread_policy() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: as above.
        let policy = unsafe { libc::sched_getscheduler(0) };
        (policy >= 0).then_some(policy)
    }
    #[cfg(not(target_os = "linux"))]
    None
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
        let policy = this_thread_policy().unwrap();
        let (own, child) = std::thread::spawn(|| {
            lower_this_thread(RenderSched::Batch, 7);
            let own = (this_thread_nice().unwrap(), this_thread_policy().unwrap());
            let child =
                std::thread::spawn(|| (this_thread_nice().unwrap(), this_thread_policy().unwrap()))
                    .join()
                    .unwrap();
            (own, child)
        })
        .join()
        .unwrap();
        assert_eq!(own, (before.max(7), libc::SCHED_BATCH));
        assert_eq!(
            child, own,
            "a thread started by a render thread inherits its nice value and policy"
        );
        assert_eq!(
            this_thread_nice().unwrap(),
            before,
            "the others keep theirs"
        );
        assert_eq!(this_thread_policy().unwrap(), policy);
    }
}
