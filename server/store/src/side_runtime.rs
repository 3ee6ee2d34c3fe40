//! A small tokio runtime of a component's own (the PostgreSQL pool's, the media bucket's):
//! their APIs are synchronous and some callers are tokio worker threads, where no blocking
//! client may run; so a call is spawned onto this runtime and the caller waits for its
//! answer on a channel. Shut down without waiting when it goes (which may happen on another
//! runtime's thread, where waiting is not allowed).

use std::future::Future;
use std::time::Duration;

use crossbeam_channel::bounded;

pub struct SideRuntime(Option<tokio::runtime::Runtime>);

impl SideRuntime {
    /// `threads` workers named `name`.
    pub fn new(threads: usize, name: &str) -> std::io::Result<SideRuntime> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name(name)
            .enable_all()
            .build()?;
        Ok(SideRuntime(Some(rt)))
    }

    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.0.as_ref().expect("taken only on drop").handle()
    }

    /// Runs `fut` here and waits for its answer, at most `timeout` (`None`: until it comes);
    /// `None` when none came (the timeout, or the runtime stopped).
    pub fn wait<R: Send + 'static>(
        &self,
        fut: impl Future<Output = R> + Send + 'static,
        timeout: Option<Duration>,
    ) -> Option<R> {
        let (tx, rx) = bounded(1);
        self.handle().spawn(async move {
            let _ = tx.send(fut.await);
        });
        match timeout {
            Some(t) => rx.recv_timeout(t).ok(),
            None => rx.recv().ok(),
        }
    }
}

impl Drop for SideRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}
