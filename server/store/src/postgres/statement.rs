//! One statement on a pool connection, the helper behind most of the store's calls: the SQL
//! and its parameters travel (owned) to the store's runtime ([`PgStore::call`]), the rows
//! come back, and a database error is classified ([`pg_error`]). Transactions and calls of
//! several statements use [`PgStore::call`] itself.

use deadpool_postgres::ClientWrapper;
use futures_util::future::BoxFuture;
use postgres::Row;
use postgres::types::ToSql;

use super::{PgStore, StoreError, pg_error};

/// A statement's parameters, owned (they travel to the store's runtime): [`params!`].
pub(super) type Params = Vec<Box<dyn ToSql + Sync + Send>>;

/// [`Params`] of these values, in order (`$1`, `$2`, ...).
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        vec![$(Box::new($p) as Box<dyn ::postgres::types::ToSql + Sync + Send>),*]
    };
}
pub(super) use params;

/// A client call (`execute`, `query`, ...) of one statement.
type Op<R> = for<'c> fn(
    &'c ClientWrapper,
    &'c str,
    &'c [&'c (dyn ToSql + Sync)],
) -> BoxFuture<'c, Result<R, tokio_postgres::Error>>;

impl PgStore {
    /// Runs `sql` with `params` by `op` on a pool connection and waits for its answer.
    fn statement<R: Send + 'static>(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: Params,
        op: Op<R>,
    ) -> Result<R, StoreError> {
        self.call(move |c| {
            Box::pin(async move {
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
                op(c, sql.as_ref(), &refs).await.map_err(pg_error)
            })
        })
    }

    /// `sql`'s count of rows changed.
    pub(super) fn execute(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: Params,
    ) -> Result<u64, StoreError> {
        self.statement(sql, params, |c, sql, p| Box::pin(c.execute(sql, p)))
    }

    /// Every row of `sql`.
    pub(super) fn query(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: Params,
    ) -> Result<Vec<Row>, StoreError> {
        self.statement(sql, params, |c, sql, p| Box::pin(c.query(sql, p)))
    }

    /// The row of `sql`, if any (more than one is an error).
    pub(super) fn query_opt(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: Params,
    ) -> Result<Option<Row>, StoreError> {
        self.statement(sql, params, |c, sql, p| Box::pin(c.query_opt(sql, p)))
    }

    /// The one row of `sql` (none, or more than one, is an error).
    pub(super) fn query_one(
        &self,
        sql: impl AsRef<str> + Send + 'static,
        params: Params,
    ) -> Result<Row, StoreError> {
        self.statement(sql, params, |c, sql, p| Box::pin(c.query_one(sql, p)))
    }
}
