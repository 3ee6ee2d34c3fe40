//! Boot: [`RenderService::start`] opens the store and the media store, builds the shared
//! state's three parts, runs boot recovery and starts the workers, the maintenance thread
//! and (with a shared store) the cluster's threads; [`Lifecycle`] stops them.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::sync::broadcast;

use crate::assets::AssetCatalog;
use crate::clock::SharedClock;
use crate::config::Config;
use crate::engine::{Prober, Renderer};
use crate::error::ServiceError;
use crate::maintenance;
use crate::shared::{Ledger, MediaSide, Pool, Shared};
use crate::store::{Store, StoreError};
use crate::sync::lock;
use crate::worker;

use super::RenderService;

/// Capacity of the change broadcast; a lagging subscriber misses ids (and should re-poll).
const EVENT_CAPACITY: usize = 1024;

/// What [`RenderService::start`] needs.
pub struct ServiceParts {
    pub config: Config,
    pub clock: SharedClock,
    pub renderer: Arc<dyn Renderer>,
    pub prober: Arc<dyn Prober>,
    /// The bucket, when `config.media_store` names one (`vidforge-s3` in the binary).
    pub objects: Option<Arc<dyn crate::media_store::ObjectBackend>>,
}

/// The service's threads, stopped (and the store flushed) when the last clone of the
/// service goes.
pub(super) struct Lifecycle {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Lifecycle {
    pub(super) fn stop(&self) {
        self.shared.pool.stop();
        let threads: Vec<_> = lock(&self.threads).drain(..).collect();
        for t in threads {
            if t.join().is_err() {
                tracing::error!("a service thread panicked");
            }
        }
        if let Err(e) = self.shared.ledger.store.flush() {
            tracing::error!(error = %e, "final flush failed");
        }
    }
}

impl Drop for Lifecycle {
    fn drop(&mut self) {
        self.stop();
    }
}

impl RenderService {
    /// Opens the store under `config.data_dir`, runs boot recovery (re-queues interrupted
    /// renders, re-arms approval deadlines; it reads only the unfinished renders), then starts
    /// `config.render_slots` workers and the maintenance thread (approval deadlines every
    /// `tick_interval`; the sweeper on its first round, then every `sweep_interval`).
    pub fn start(parts: ServiceParts) -> Result<RenderService, ServiceError> {
        let mut config = parts.config;
        config
            .validate()
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        config.data_dir = std::path::absolute(&config.data_dir)?;
        if let crate::config::MediaStoreSetting::Dir(media) = &config.media_store {
            config.media_store = crate::config::MediaStoreSetting::Dir(std::path::absolute(media)?);
        }
        config.ensure_dirs()?;
        let store = open_store(&config)?;
        let media = crate::media_store::MediaStore::open(&config, parts.objects)?;
        // Nothing of this node's is in flight yet: its marked multipart uploads are a killed
        // process's. A bucket that is down now is the sweeper's to clean later.
        if let Err(e) = media.abort_orphan_uploads_blocking(true) {
            tracing::warn!(error = %e, "cannot look for this node's unfinished uploads");
        }
        let assets = AssetCatalog::new(
            store.clone(),
            media.clone(),
            config.assets_dir(),
            config.upload_limits(),
            parts.prober,
            parts.clock.clone(),
        );
        // With a bucket, the local media tree is this process's scratch alone, and nothing of
        // it is in flight yet: what is there is a killed process's.
        if media.is_object() {
            for dir in [
                config.results_dir(),
                config.segments_dir(),
                config.previews_dir(),
            ] {
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir)?;
            }
        }
        // Another node's upload may be in flight in a shared media dir: only partials that
        // nothing has written to for a while are a crash's leftovers there.
        assets.remove_partial_uploads(if store.is_shared() && !media.is_object() {
            crate::cluster::PARTIAL_UPLOAD_MIN_AGE
        } else {
            std::time::Duration::ZERO
        });
        let (media_dir, min_free_bytes) =
            (config.media_root().to_path_buf(), config.min_free_bytes);
        let node = config.node_name();
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let disk = crate::disk::DiskGuard::new(&media_dir, min_free_bytes);
        let media = MediaSide::new(
            media,
            assets,
            disk,
            config.results_dir(),
            config.segments_dir(),
            config.previews_dir(),
        );
        let config = Arc::new(config);
        let shared = Arc::new(Shared {
            ledger: Ledger::new(config.clone(), store, parts.clock, events),
            pool: Pool::new(node),
            media,
            config,
            renderer: parts.renderer,
        });
        maintenance::recover(&shared)?;
        let mut threads = worker::spawn_workers(&shared)?;
        threads.push(maintenance::spawn_maintenance(&shared)?);
        if shared.ledger.store.is_shared() {
            threads.extend(crate::cluster::spawn(&shared)?);
        }
        Ok(RenderService {
            life: Arc::new(Lifecycle {
                shared: shared.clone(),
                threads: Mutex::new(threads),
            }),
            shared,
        })
    }
}

/// Opens the database; when that fails for lack of space, releases the disk reserve and
/// tries once more (the server then starts, serves reads and refuses new work until space
/// is back). Puts the reserve (back) in place when there is room for it.
fn open_store(config: &Config) -> Result<Store, ServiceError> {
    if let crate::config::StoreSetting::Postgres(url) = &config.store {
        let store = Store::connect_postgres(url)?;
        if config.media_store == crate::config::MediaStoreSetting::DataDir {
            tracing::warn!(
                "a shared store without --media-store: uploads and results stay in this node's \
                 data dir, where other nodes cannot read them"
            );
        }
        tracing::info!(store = %store.describe(), node = %config.node_name(), "using the shared PostgreSQL store");
        return Ok(store);
    }
    let store = match Store::open(&config.db_dir()) {
        Err(e)
            if StoreError::io(&e).is_some_and(crate::error::is_no_space)
                && crate::disk::release_ballast(&config.data_dir) =>
        {
            Store::open(&config.db_dir())?
        }
        other => other?,
    };
    crate::disk::refill_reserve(
        &config.data_dir,
        config.disk_reserve_bytes,
        config.min_free_bytes,
    );
    Ok(store)
}
