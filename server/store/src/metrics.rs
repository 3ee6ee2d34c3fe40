//! The store's own metric: `vidforge_store_flush_seconds` (histogram, label `backend`),
//! recorded through the `metrics` facade (a no-op until a recorder is installed; the exporter
//! and its buckets are vidforge-http's).

use std::time::Duration;

use metrics::histogram;

/// A store write was made durable (`backend`: `sled` or `postgres`) in `took`.
pub(crate) fn store_flush(backend: &'static str, took: Duration) {
    histogram!("vidforge_store_flush_seconds", "backend" => backend).record(took.as_secs_f64());
}
