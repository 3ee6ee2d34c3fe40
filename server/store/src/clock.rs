//! Injectable time. Everything that compares against a TTL or deadline asks a [`Clock`], so
//! tests can move time forward instead of sleeping.
//!
//! Test-only hook: when the environment variable [`TEST_CLOCK_OFFSET_ENV`]
//! (`VIDFORGE_TEST_CLOCK_OFFSET_FILE`) names a file, [`from_env`] returns a clock whose `now` is
//! system time plus the number of seconds in that file (re-read on every call; missing or
//! unparsable means 0). End-to-end tests use it to age a running server's tasks without
//! waiting. Never set it in production.

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Environment variable naming the offset file of the test clock (test-only).
pub const TEST_CLOCK_OFFSET_ENV: &str = "VIDFORGE_TEST_CLOCK_OFFSET_FILE";

/// A source of the current time.
pub trait Clock: Send + Sync + Debug {
    fn now(&self) -> SystemTime;

    /// Milliseconds since the Unix epoch (0 before 1970).
    fn now_ms(&self) -> u64 {
        to_unix_ms(self.now())
    }
}

/// Shared handle to a clock.
pub type SharedClock = Arc<dyn Clock>;

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// System time shifted by an adjustable offset (in-process tests).
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset_ms: AtomicI64,
}

impl OffsetClock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves this clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.offset_ms
            .fetch_add(d.as_millis().min(i64::MAX as u128) as i64, Ordering::SeqCst);
    }

    /// The current offset from system time.
    pub fn offset(&self) -> Duration {
        Duration::from_millis(self.offset_ms.load(Ordering::SeqCst).max(0) as u64)
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> SystemTime {
        shift(SystemTime::now(), self.offset_ms.load(Ordering::SeqCst))
    }
}

/// System time plus the seconds written in a file, re-read on every call (out-of-process tests).
#[derive(Debug, Clone)]
pub struct FileOffsetClock {
    path: PathBuf,
}

impl FileOffsetClock {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    fn offset_ms(&self) -> i64 {
        std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .map(|secs| (secs * 1000.0) as i64)
            .unwrap_or(0)
    }
}

impl Clock for FileOffsetClock {
    fn now(&self) -> SystemTime {
        shift(SystemTime::now(), self.offset_ms())
    }
}

/// The process clock: [`SystemClock`], or [`FileOffsetClock`] when [`TEST_CLOCK_OFFSET_ENV`]
/// is set (test-only).
pub fn from_env() -> SharedClock {
    match std::env::var_os(TEST_CLOCK_OFFSET_ENV) {
        Some(path) if !path.is_empty() => {
            tracing::warn!(
                file = %PathBuf::from(&path).display(),
                "{TEST_CLOCK_OFFSET_ENV} is set: using the test clock (never do this in production)"
            );
            Arc::new(FileOffsetClock::new(path))
        }
        _ => Arc::new(SystemClock),
    }
}

fn shift(t: SystemTime, offset_ms: i64) -> SystemTime {
    if offset_ms >= 0 {
        t + Duration::from_millis(offset_ms as u64)
    } else {
        t.checked_sub(Duration::from_millis(offset_ms.unsigned_abs()))
            .unwrap_or(UNIX_EPOCH)
    }
}

/// Milliseconds since the Unix epoch.
pub fn to_unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis().min(u64::MAX as u128) as u64)
        .unwrap_or(0)
}

/// `ms` plus a duration, saturating.
pub fn add_ms(ms: u64, d: Duration) -> u64 {
    ms.saturating_add(d.as_millis().min(u64::MAX as u128) as u64)
}

/// RFC 3339 UTC timestamp with second precision (`2026-07-29T14:02:11Z`) for unix ms, by
/// `humantime`; times past its last representable second (the end of year 9999) print as it.
pub fn rfc3339(unix_ms: u64) -> String {
    const LAST_SECOND: u64 = 253_402_300_799;
    let secs = (unix_ms / 1000).min(LAST_SECOND);
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        // 2026-07-29T14:02:11Z
        assert_eq!(rfc3339(1_785_333_731_000), "2026-07-29T14:02:11Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(u64::MAX), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn offset_clock_advances() {
        let c = OffsetClock::new();
        let before = c.now_ms();
        c.advance(Duration::from_secs(3600));
        assert!(c.now_ms() >= before + 3_600_000);
    }

    #[test]
    fn file_offset_clock_rereads() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("offset");
        let c = FileOffsetClock::new(&f);
        let base = SystemClock.now_ms();
        assert!(c.now_ms() < base + 60_000);
        std::fs::write(&f, "86400").unwrap();
        assert!(c.now_ms() >= base + 86_400_000);
        std::fs::write(&f, "garbage").unwrap();
        assert!(c.now_ms() < base + 60_000);
    }
}
