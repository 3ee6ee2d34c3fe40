//! The connection pool: [`deadpool_postgres`] over `tokio-postgres`, driven by a small tokio
//! runtime of the store's own ([`SideRuntime`]); a caller waits at most [`CALL_TIMEOUT`].

use std::future::Future;
use std::time::Duration;

use deadpool_postgres::{
    ClientWrapper, HookError, Manager, ManagerConfig, Object, Pool, PoolError, QueueMode,
    RecyclingMethod, Runtime,
};
use futures_util::future::BoxFuture;

use super::{CONNECT_TIMEOUT, StoreError, pg_error};
use crate::side_runtime::SideRuntime;

/// Connections per node.
const POOL_SIZE: usize = 4;
/// Threads of the store's runtime (they only drive sockets; the work is PostgreSQL's).
const RUNTIME_THREADS: usize = 2;
/// Longest a caller waits for its call to come back (queueing included).
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest wait for the migrations at start-up (index builds over a large table included).
const MIGRATION_PATIENCE: Duration = Duration::from_secs(60 * 60);
/// A pool connection idle this long is checked (an empty query) before its next use: a
/// connection whose peer vanished without closing it (a network fault) looks open until it
/// is used. One the server closed (a restart) is known closed at once and replaced.
const REVALIDATE_AFTER: Duration = Duration::from_secs(1);

/// The store's tokio runtime ([`SideRuntime`]).
pub(super) struct StoreRuntime(SideRuntime);

impl StoreRuntime {
    pub(super) fn new() -> Result<StoreRuntime, StoreError> {
        Ok(StoreRuntime(SideRuntime::new(
            RUNTIME_THREADS,
            "vidforge-pg",
        )?))
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.0.handle()
    }

    /// Runs `fut` on the store's runtime and waits at most [`CALL_TIMEOUT`] for its answer.
    pub(super) fn block_on<R: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<R, StoreError>> + Send + 'static,
    ) -> Result<R, StoreError> {
        self.0.wait(fut, Some(CALL_TIMEOUT)).unwrap_or_else(|| {
            Err(StoreError::Unavailable(format!(
                "PostgreSQL did not answer within {} s",
                CALL_TIMEOUT.as_secs()
            )))
        })
    }
}

impl StoreRuntime {
    /// [`StoreRuntime::block_on`] for the migrations at start-up, which wait for another
    /// node's and may build indexes over a large table: at most [`MIGRATION_PATIENCE`].
    pub(super) fn block_on_patiently<R: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<R, StoreError>> + Send + 'static,
    ) -> Result<R, StoreError> {
        self.0
            .wait(fut, Some(MIGRATION_PATIENCE))
            .unwrap_or_else(|| {
                Err(StoreError::Unavailable(format!(
                    "the store's migrations did not finish within {} minutes",
                    MIGRATION_PATIENCE.as_secs() / 60
                )))
            })
    }
}

/// The pool (connections open on first use and after one broke).
pub(super) fn build(config: tokio_postgres::Config, rt: &StoreRuntime) -> Result<Pool, StoreError> {
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let _entered = rt.handle().enter();
    Pool::builder(manager)
        .max_size(POOL_SIZE)
        .runtime(Runtime::Tokio1)
        .queue_mode(QueueMode::Lifo)
        .wait_timeout(Some(CALL_TIMEOUT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .recycle_timeout(Some(CONNECT_TIMEOUT))
        .pre_recycle(deadpool_postgres::Hook::async_fn(|client, metrics| {
            let idle = metrics.last_used() >= REVALIDATE_AFTER;
            Box::pin(async move {
                if idle {
                    revalidate(client).await?;
                }
                Ok(())
            })
        }))
        .build()
        .map_err(|e| StoreError::Config(format!("connection pool: {e}")))
}

/// An empty query, within [`CONNECT_TIMEOUT`].
async fn revalidate(client: &ClientWrapper) -> Result<(), HookError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, client.simple_query("")).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(HookError::Backend(e)),
        Err(_) => Err(HookError::message("an idle connection did not answer")),
    }
}

/// Runs `f` with a pool connection on the store's runtime and waits for its answer. A
/// connection whose call failed as [`StoreError::Unavailable`] leaves the pool.
pub(super) fn call<R: Send + 'static>(
    pool: &Pool,
    rt: &StoreRuntime,
    f: impl for<'c> FnOnce(&'c mut ClientWrapper) -> BoxFuture<'c, Result<R, StoreError>>
    + Send
    + 'static,
) -> Result<R, StoreError> {
    let pool = pool.clone();
    rt.block_on(async move {
        let mut conn = pool.get().await.map_err(pool_error)?;
        let out = f(&mut conn).await;
        if matches!(out, Err(StoreError::Unavailable(_))) {
            drop(Object::take(conn));
        }
        out
    })
}

fn pool_error(e: PoolError) -> StoreError {
    match e {
        PoolError::Backend(e) => pg_error(e),
        PoolError::Closed => StoreError::Unavailable("the store is closed".into()),
        other => StoreError::Unavailable(format!("PostgreSQL connection pool: {other}")),
    }
}
