//! The accept loop: HTTP/1.1 connections served by hyper with the connection-level limits
//! `axum::serve` cannot set, and a graceful drain on shutdown.
//!
//! - **Connection cap** (`max_connections`): a [`Semaphore`] permit is taken *before* each
//!   `accept`, so connections over the cap wait in the kernel's listen backlog, unread, until
//!   one closes.
//! - **Header-read timeout** (`header_read_timeout`): hyper's own
//!   [`http1::Builder::header_read_timeout`] (with tokio's timer). hyper starts that clock
//!   whenever a connection waits for a request head, so it ends half-sent headers and silent
//!   or unused kept-alive connections alike.
//! - **Idle timeout** (`idle_timeout`): the socket is wrapped in `Tracked`, which notes the
//!   last byte read or written. A connection that moves nothing for `idle_timeout` is asked to
//!   close (hyper's graceful shutdown: at once without a request in flight, after it
//!   otherwise); one that still moves nothing for another `idle_timeout` is dropped. SSE
//!   streams send keep-alives more often ([`sse_keep_alive`]).
//! - **Body-progress timeout** (`body_idle_timeout`): tower-http's request-body timeout on
//!   the router (`vidforge::app::router_with`); handlers recognise its error with
//!   [`is_body_timeout`] (uploads answer `408` and remove their temporary file).
//!
//! - **Upload pace** (`upload_min_rate` after `upload_rate_grace`): [`Paced`] ends an upload
//!   whose average rate since its start falls under the minimum once the grace period is over
//!   (Apache `mod_reqtimeout`'s `MinRate`: each byte buys `1 / min_rate` s more), so a body
//!   that trickles a byte now and then (which resets the body-progress timeout every time)
//!   cannot hold a connection for long. An upload of `n` bytes therefore ends within
//!   `max(grace, n / min_rate)`, and never later than `grace` plus its `Content-Length` (or
//!   `max_upload_bytes`) at `min_rate`. Handlers recognise its error with
//!   [`is_upload_too_slow`] (`408`, temporary file removed).
//! - **Upload slots** (`max_concurrent_uploads`, `max_uploads_per_peer`): [`UploadGate`]
//!   admits an upload only while fewer than that many run, on the server and from the
//!   peer's IP address; others are refused at once, before their body is read. The server's
//!   cap is at most half of `max_connections` (checked at load), so uploads alone never take
//!   the connections `/mcp` and downloads need.
//!
//! On shutdown the listener is closed, every connection is told to finish its request in
//! flight and close, and [`serve`] returns when all have (callers bound that wait: see
//! `cli/serve.rs`).

use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use vidforge_core::config::Config;

mod upload_gate;
mod upload_pace;

pub use upload_gate::{UploadGate, UploadSlot, UploadsBusy};
pub use upload_pace::{Paced, UploadPace, UploadTooSlow, is_upload_too_slow};

/// The connection-level limits of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl ConnectionLimits {
    pub fn from_config(config: &Config) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
            max_connections: config.max_connections,
        }
    }
}

/// The longest gap between SSE keep-alives: a third of the idle timeout (at most rmcp's
/// default of 15 s), so the idle timeout never ends a live stream.
pub fn sse_keep_alive(idle_timeout: Duration) -> Duration {
    (idle_timeout / 3).min(Duration::from_secs(15))
}

/// True when `error` (or an error it wraps) is the request-body timeout's.
pub fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    // Bounded: error chains are short, but never follow more than 16 links.
    for _ in 0..16 {
        let Some(e) = current else {
            return false;
        };
        if e.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        current = e.source();
    }
    false
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves, then drains the
/// open connections (each finishes its request in flight) and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Forget finished connections so the set stays as small as the open ones.
        while connections.try_join_next().is_some() {}
        connections.spawn(serve_connection(
            stream,
            router.clone(),
            limits,
            stop_rx.clone(),
            permit,
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    tracing::debug!(open = connections.len(), "draining connections");
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Per-connection errors (the peer gave up) are skipped; others (out of file descriptors)
/// wait a moment, as `axum::serve` does, so the loop does not spin.
async fn accept_error(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(250)).await;
}

async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok();
    let activity = Activity::new();
    let io = TokioIo::new(Tracked {
        inner: stream,
        activity: activity.clone(),
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    // The peer's address for handlers that need it (`/metrics` answers loopback peers).
    let service = router.map_request(move |mut req: http::Request<Incoming>| {
        if let Some(addr) = peer {
            req.extensions_mut().insert(ConnectInfo(addr));
        }
        req
    });
    let conn = builder
        .serve_connection(io, TowerToHyperService::new(service))
        .with_upgrades();
    let mut conn = pin!(conn);
    let mut stopping = false;
    let mut idle_warned = false;
    loop {
        let quiet = limits.idle_timeout.saturating_sub(activity.idle_for());
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep(quiet) => {
                if activity.idle_for() < limits.idle_timeout {
                    continue;
                }
                if idle_warned {
                    tracing::debug!("closing a connection that moved no bytes after being asked to close");
                    break;
                }
                idle_warned = true;
                activity.touch();
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// When a connection last moved a byte.
#[derive(Clone)]
struct Activity {
    start: Instant,
    last_ms: Arc<AtomicU64>,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// A socket that records its last read or written byte in an [`Activity`].
struct Tracked {
    inner: TcpStream,
    activity: Activity,
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.touch();
        }
        result
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        result
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_alives_beat_the_idle_timeout() {
        assert_eq!(
            sse_keep_alive(Duration::from_secs(60)),
            Duration::from_secs(15)
        );
        assert_eq!(
            sse_keep_alive(Duration::from_secs(3)),
            Duration::from_secs(1)
        );
    }

    #[tokio::test]
    async fn body_timeouts_are_recognised_through_wrappers() {
        use futures::StreamExt;
        let silent = http_body_util::StreamBody::new(futures::stream::pending::<
            Result<hyper::body::Frame<bytes::Bytes>, io::Error>,
        >());
        let body = axum::body::Body::new(tower_http::timeout::TimeoutBody::new(
            Duration::from_millis(10),
            silent,
        ));
        let err = body
            .into_data_stream()
            .next()
            .await
            .expect("an item")
            .expect_err("the body times out");
        assert!(is_body_timeout(&err), "{err}");
        let other = axum::Error::new(io::Error::other("reset"));
        assert!(!is_body_timeout(&other));
    }
}
