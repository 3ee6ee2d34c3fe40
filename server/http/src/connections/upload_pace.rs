//! Upload pace (`upload_min_rate` after `upload_rate_grace`): [`Paced`] ends an upload whose
//! average rate since its start falls under the minimum once the grace period is over.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use futures_util::Stream;

use vidforge_core::config::Config;

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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::connections::is_body_timeout;

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
}
