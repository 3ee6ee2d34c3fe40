//! Media in a bucket, over an [`ObjectBackend`]: the source cache beside it, uploads retried
//! with backoff while the bucket is away, and a cached answer to "can the bucket be
//! reached?" that refuses new work meanwhile.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::HEALTH_RECHECK;
use super::backend::{ObjectBackend, ObjectError};
use super::cache::SourceCache;
use crate::config::Config;
use crate::error::ServiceError;
use crate::sync::lock;

/// Longest pause between two attempts of a render's upload.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(10);

/// The bucket and what this node keeps beside it.
pub struct ObjectMedia {
    backend: Arc<dyn ObjectBackend>,
    presign_ttl: Duration,
    retry_window: Duration,
    cache: SourceCache,
    /// The last answer to "can the bucket be reached?" and when it was had.
    health: Mutex<Option<(Instant, Result<(), String>)>>,
    /// The directories (`results/<id>`, `assets/<id>`) of uploads that failed, with when they
    /// last did: a request that timed out here may still land in the bucket later, where no
    /// record will name it. The sweep looks at these ([`ObjectMedia::upload_suspects`]).
    suspects: Mutex<HashMap<PathBuf, Instant>>,
}

impl ObjectMedia {
    pub(super) fn new(
        backend: Arc<dyn ObjectBackend>,
        config: &Config,
    ) -> Result<ObjectMedia, ServiceError> {
        Ok(ObjectMedia {
            backend,
            presign_ttl: config.presigned_url_ttl,
            retry_window: config.media_retry_window,
            cache: SourceCache::open(config.media_cache_dir(), config.media_cache_bytes)?,
            health: Mutex::new(None),
            suspects: Mutex::default(),
        })
    }

    pub(super) fn backend(&self) -> &dyn ObjectBackend {
        &*self.backend
    }

    pub(super) fn cache(&self) -> &SourceCache {
        &self.cache
    }

    pub(super) fn presign_ttl(&self) -> Duration {
        self.presign_ttl
    }

    /// The outcome of a bucket call, recorded: an answer marks the bucket reachable, an
    /// unreachable bucket marks it down (new work is refused until it answers again).
    pub(super) fn outcome<T>(&self, r: Result<T, ObjectError>) -> Result<T, ServiceError> {
        match r {
            Ok(v) => {
                let mut health = lock(&self.health);
                if matches!(&*health, Some((_, Err(_)))) {
                    *health = Some((Instant::now(), Ok(())));
                }
                Ok(v)
            }
            Err(ObjectError::Unreachable(reason)) => {
                *lock(&self.health) = Some((Instant::now(), Err(reason.clone())));
                Err(ServiceError::MediaUnavailable {
                    reason: format!("the media store failed: {reason}"),
                })
            }
            Err(ObjectError::Missing(what)) => Err(ServiceError::Internal(format!(
                "media object {what} is missing"
            ))),
            Err(ObjectError::Io(e)) => Err(e.into()),
        }
    }

    /// `op` on `rel`, tried again with backoff while the bucket cannot be reached, for at
    /// most `media_retry_window` (or until `stop`): what a render does, since giving up fails
    /// it.
    pub(super) fn retried<T>(
        &self,
        rel: &Path,
        stop: &dyn Fn() -> bool,
        mut op: impl FnMut() -> Result<T, ServiceError>,
    ) -> Result<T, ServiceError> {
        let deadline = Instant::now() + self.retry_window;
        let mut pause = Duration::from_millis(500);
        loop {
            match op() {
                Err(ServiceError::MediaUnavailable { reason })
                    if Instant::now() + pause < deadline && !stop() =>
                {
                    tracing::warn!(object = %rel.display(), %reason, retry_in_ms = pause.as_millis() as u64, "the media store cannot be reached; retrying");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// Uploads `local` as `rel` once; a failure makes its directory a suspect.
    pub(super) fn upload(&self, local: &Path, rel: &Path) -> Result<(), ServiceError> {
        let result = self.outcome(self.backend.upload(local, rel));
        if result.is_err()
            && let Some(dir) = rel.parent()
        {
            lock(&self.suspects).insert(dir.to_path_buf(), Instant::now());
        }
        result
    }

    /// Uploads `local` as `rel`, [`ObjectMedia::retried`].
    pub(super) fn upload_with_retries(
        &self,
        local: &Path,
        rel: &Path,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), ServiceError> {
        self.retried(rel, stop, || self.upload(local, rel))
    }

    /// The directories whose upload failed within `window`; older ones are forgotten.
    pub(super) fn upload_suspects(&self, window: Duration) -> Vec<String> {
        let mut suspects = lock(&self.suspects);
        suspects.retain(|_, at| at.elapsed() < window);
        suspects
            .keys()
            .map(|dir| dir.to_string_lossy().into_owned())
            .collect()
    }

    /// The local copy of `rel` (downloaded on a miss; least recently used copies out).
    pub(super) fn cached_copy(&self, rel: &Path) -> Result<PathBuf, ServiceError> {
        if let Some(hit) = self.cache.get(rel) {
            return Ok(hit);
        }
        let partial = self.cache.partial_path();
        if let Err(e) = self.outcome(self.backend.download(rel, &partial)) {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        Ok(self.cache.adopt(rel, &partial))
    }

    /// Whether the bucket answers, asked at most every [`HEALTH_RECHECK`]; a failure is
    /// `service_unavailable`.
    pub(super) fn check_available(&self) -> Result<(), ServiceError> {
        let cached = lock(&self.health).clone();
        let answer = match cached {
            Some((at, answer)) if at.elapsed() < HEALTH_RECHECK => answer,
            _ => {
                let answer = self.backend.probe().map_err(|e| e.to_string());
                *lock(&self.health) = Some((Instant::now(), answer.clone()));
                answer
            }
        };
        answer.map_err(|reason| ServiceError::MediaUnavailable {
            reason: format!("the media store cannot be reached: {reason}"),
        })
    }
}
