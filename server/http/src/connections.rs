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

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::ConnectInfo;
use futures_util::Stream;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use vidforge_core::config::Config;

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

/// How many uploads run at once: on the server (`max_concurrent_uploads`) and from one peer
/// IP address (`max_uploads_per_peer`). Cheap to clone (one shared count).
#[derive(Clone, Debug)]
pub struct UploadGate {
    inner: Arc<GateInner>,
}

#[derive(Debug)]
struct GateInner {
    max: usize,
    per_peer: usize,
    running: Mutex<Running>,
}

#[derive(Debug, Default)]
struct Running {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// Why [`UploadGate::try_enter`] refused an upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UploadsBusy {
    /// `max_concurrent_uploads` uploads are running.
    #[error("{max} uploads are already in progress on this server")]
    Server { max: usize },
    /// `max_uploads_per_peer` uploads from this address are running.
    #[error("{max} uploads from this address are already in progress")]
    Peer { max: usize },
}

/// One admitted upload; its place is given back when it is dropped.
#[derive(Debug)]
pub struct UploadSlot {
    gate: Arc<GateInner>,
    peer: Option<IpAddr>,
}

impl UploadGate {
    /// At most `max` uploads at once, `per_peer` of them from one address (both at least 1).
    pub fn new(max: usize, per_peer: usize) -> UploadGate {
        UploadGate {
            inner: Arc::new(GateInner {
                max: max.max(1),
                per_peer: per_peer.max(1),
                running: Mutex::new(Running::default()),
            }),
        }
    }

    pub fn from_config(config: &Config) -> UploadGate {
        UploadGate::new(config.upload_slots(), config.max_uploads_per_peer)
    }

    /// Admits an upload from `peer` (`None`: unknown, counted only against the server's cap)
    /// or says why not; never waits.
    pub fn try_enter(&self, peer: Option<IpAddr>) -> Result<UploadSlot, UploadsBusy> {
        let gate = &self.inner;
        let mut running = gate.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.total >= gate.max {
            return Err(UploadsBusy::Server { max: gate.max });
        }
        if let Some(ip) = peer {
            let mine = running.by_peer.entry(ip).or_insert(0);
            if *mine >= gate.per_peer {
                return Err(UploadsBusy::Peer { max: gate.per_peer });
            }
            *mine += 1;
        }
        running.total += 1;
        Ok(UploadSlot {
            gate: gate.clone(),
            peer,
        })
    }

    /// Uploads running now.
    pub fn running(&self) -> usize {
        self.inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .total
    }
}

impl Drop for UploadSlot {
    fn drop(&mut self) {
        let mut running = self.gate.running.lock().unwrap_or_else(|e| e.into_inner());
        running.total = running.total.saturating_sub(1);
        if let Some(ip) = self.peer
            && let Some(n) = running.by_peer.get_mut(&ip)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.by_peer.remove(&ip);
            }
        }
    }
}

/// The pace an upload must keep: `min_rate` bytes/s on average since its start, once `grace`
/// has passed, and done by `total` at the latest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadPace {
    /// Bytes per second (at least 1).
    pub min_rate: u64,
    pub grace: Duration,
    /// The whole upload's deadline: its declared size (or the size limit) at `min_rate`,
    /// plus `grace`.
    pub total: Duration,
}

impl UploadPace {
    /// The pace for an upload declaring `declared` bytes (`None`: up to `max_upload_bytes`);
    /// `None` when `upload_min_rate` is 0 (no minimum).
    pub fn from_config(config: &Config, declared: Option<u64>) -> Option<UploadPace> {
        let min_rate = config.upload_min_rate;
        if min_rate == 0 {
            return None;
        }
        let size = declared.unwrap_or(config.max_upload_bytes);
        Some(UploadPace {
            min_rate,
            grace: config.upload_rate_grace,
            total: secs_at(size, min_rate).saturating_add(config.upload_rate_grace),
        })
    }

    /// How long an upload that has received `received` bytes may have run.
    pub fn allowed(&self, received: u64) -> Duration {
        self.grace
            .max(secs_at(received, self.min_rate))
            .min(self.total)
    }
}

/// `bytes` at `rate` bytes/s.
fn secs_at(bytes: u64, rate: u64) -> Duration {
    Duration::from_secs_f64(bytes as f64 / rate.max(1) as f64)
}

/// An upload fell under [`UploadPace`]: the error [`Paced`] ends its stream with.
#[derive(Debug, thiserror::Error)]
#[error(
    "the upload sent {received} bytes in {elapsed:?}, under the minimum of {min_rate} bytes/s \
     after the first {grace:?}"
)]
pub struct UploadTooSlow {
    pub received: u64,
    pub elapsed: Duration,
    pub min_rate: u64,
    pub grace: Duration,
}

/// True when `error` (or an error it wraps) is [`Paced`]'s [`UploadTooSlow`].
pub fn is_upload_too_slow(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    for _ in 0..16 {
        let Some(e) = current else {
            return false;
        };
        if e.is::<UploadTooSlow>() {
            return true;
        }
        current = e.source();
    }
    false
}

/// A body stream held to an [`UploadPace`]: once the upload is behind it (checked on every
/// chunk and by a timer while the body is silent), the stream yields one [`UploadTooSlow`]
/// error and ends.
pub struct Paced<S> {
    inner: S,
    pace: UploadPace,
    start: tokio::time::Instant,
    received: u64,
    timer: Pin<Box<tokio::time::Sleep>>,
    armed: tokio::time::Instant,
    ended: bool,
}

impl<S> Paced<S> {
    pub fn new(inner: S, pace: UploadPace) -> Paced<S> {
        let start = tokio::time::Instant::now();
        let armed = start + pace.allowed(0);
        Paced {
            inner,
            pace,
            start,
            received: 0,
            timer: Box::pin(tokio::time::sleep_until(armed)),
            armed,
            ended: false,
        }
    }

    fn deadline(&self) -> tokio::time::Instant {
        self.start + self.pace.allowed(self.received)
    }

    fn too_slow(&mut self) -> Poll<Option<Result<Bytes, axum::Error>>> {
        self.ended = true;
        let e = UploadTooSlow {
            received: self.received,
            elapsed: self.start.elapsed(),
            min_rate: self.pace.min_rate,
            grace: self.pace.grace,
        };
        tracing::debug!(error = %e, "aborting a slow upload");
        Poll::Ready(Some(Err(axum::Error::new(e))))
    }
}

impl<S> Stream for Paced<S>
where
    S: Stream<Item = Result<Bytes, axum::Error>> + Unpin,
{
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                this.received = this.received.saturating_add(chunk.len() as u64);
                if tokio::time::Instant::now() > this.deadline() {
                    return this.too_slow();
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(other) => {
                this.ended = other.is_none();
                Poll::Ready(other)
            }
            Poll::Pending => {
                let deadline = this.deadline();
                if tokio::time::Instant::now() >= deadline {
                    return this.too_slow();
                }
                if deadline != this.armed {
                    this.armed = deadline;
                    this.timer.as_mut().reset(deadline);
                }
                match this.timer.as_mut().poll(cx) {
                    Poll::Ready(()) => this.too_slow(),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
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

    #[test]
    fn the_upload_gate_counts_the_server_and_each_peer() {
        let gate = UploadGate::new(3, 2);
        let a: IpAddr = [127, 0, 0, 2].into();
        let b: IpAddr = [127, 0, 0, 3].into();
        let a1 = gate.try_enter(Some(a)).unwrap();
        let _a2 = gate.try_enter(Some(a)).unwrap();
        assert_eq!(
            gate.try_enter(Some(a)).unwrap_err(),
            UploadsBusy::Peer { max: 2 }
        );
        let _b1 = gate.try_enter(Some(b)).unwrap();
        assert_eq!(
            gate.try_enter(None).unwrap_err(),
            UploadsBusy::Server { max: 3 }
        );
        assert_eq!(gate.running(), 3);
        drop(a1);
        assert_eq!(gate.running(), 2);
        let _a3 = gate.try_enter(Some(a)).unwrap();
        assert_eq!(gate.running(), 3);
    }

    #[test]
    fn the_pace_allows_grace_then_a_second_per_min_rate_bytes() {
        let pace = UploadPace {
            min_rate: 1000,
            grace: Duration::from_secs(2),
            total: Duration::from_secs(12),
        };
        assert_eq!(pace.allowed(0), Duration::from_secs(2));
        assert_eq!(
            pace.allowed(1999),
            Duration::from_millis(1999).max(pace.grace)
        );
        assert_eq!(pace.allowed(5000), Duration::from_secs(5));
        assert_eq!(pace.allowed(u64::MAX / 2), Duration::from_secs(12));
        let mut config = Config {
            upload_min_rate: 1000,
            upload_rate_grace: Duration::from_secs(2),
            ..Config::default()
        };
        let declared = UploadPace::from_config(&config, Some(10_000)).unwrap();
        assert_eq!(declared.total, Duration::from_secs(12));
        let open = UploadPace::from_config(&config, None).unwrap();
        assert!(open.total > Duration::from_secs(1_000_000));
        config.upload_min_rate = 0;
        assert!(UploadPace::from_config(&config, None).is_none());
    }

    #[tokio::test]
    async fn a_trickling_body_is_cut_after_the_grace_period() {
        use futures::StreamExt;
        let pace = UploadPace {
            min_rate: 1000,
            grace: Duration::from_millis(200),
            total: Duration::from_secs(60),
        };
        // One byte every 20 ms: far under 1000 bytes/s, yet never silent.
        let trickle = futures::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Some((Ok::<_, axum::Error>(Bytes::from_static(b"x")), ()))
        });
        let start = Instant::now();
        let mut paced = Paced::new(Box::pin(trickle), pace);
        let mut got = 0;
        let err = loop {
            match paced.next().await.expect("ends with an error") {
                Ok(c) => got += c.len(),
                Err(e) => break e,
            }
        };
        assert!(is_upload_too_slow(&err), "{err}");
        assert!(!is_body_timeout(&err));
        assert!(got < 20, "{got} bytes passed");
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert!(paced.next().await.is_none());
        // A fast body passes whole.
        let fast = futures::stream::iter(
            (0..10).map(|_| Ok::<_, axum::Error>(Bytes::from(vec![0u8; 1000]))),
        );
        let total: usize = Paced::new(fast, pace)
            .map(|c| c.expect("no error").len())
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .sum();
        assert_eq!(total, 10_000);
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
