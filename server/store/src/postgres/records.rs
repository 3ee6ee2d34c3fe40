//! The records: renders, idempotency keys, assets and browser session epochs.

use postgres::types::Json;

use super::statement::params;
use super::{
    AssetRecord, Change, IdempotencyEntry, Inserted, NewKey, OutboxEvent, PgStore, RenderRecord,
    StoreError, Updated, doc, docs, idempotency_entry, pg_error, to_i64,
};
use crate::update::{self, Versioned};

impl PgStore {
    pub(crate) fn get_render(&self, id: &str) -> Result<Option<RenderRecord>, StoreError> {
        self.query_opt(
            "SELECT doc FROM renders WHERE id = $1",
            params![id.to_string()],
        )?
        .map(|row| doc(id, &row, 0))
        .transpose()
    }

    pub(crate) fn renders_named(&self, ids: &[String]) -> Result<Vec<RenderRecord>, StoreError> {
        let rows = self.query(
            "SELECT id, doc FROM renders WHERE id = ANY($1)",
            params![ids.to_vec()],
        )?;
        Ok(docs(rows, "render"))
    }

    pub(crate) fn put_render(&self, rec: &RenderRecord) -> Result<(), StoreError> {
        self.put_renders(std::slice::from_ref(rec))
    }

    /// Every record of `recs` inserted or replaced by one statement (one transaction).
    pub(crate) fn put_renders(&self, recs: &[RenderRecord]) -> Result<(), StoreError> {
        let ids: Vec<String> = recs.iter().map(|r| r.id.clone()).collect();
        let principals: Vec<String> = recs.iter().map(|r| r.principal.clone()).collect();
        let states: Vec<&'static str> = recs.iter().map(|r| r.state.as_str()).collect();
        let created: Vec<i64> = recs.iter().map(|r| to_i64(r.created_at)).collect();
        let docs: Vec<Json<RenderRecord>> = recs.iter().map(|r| Json(r.clone())).collect();
        self.execute(
            "INSERT INTO renders (id, principal, state, created_at, doc)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::jsonb[])
             ON CONFLICT (id) DO UPDATE SET principal = EXCLUDED.principal,
                 state = EXCLUDED.state, created_at = EXCLUDED.created_at,
                 doc = EXCLUDED.doc, version = renders.version + 1",
            params![ids, principals, states, created, docs],
        )?;
        Ok(())
    }

    /// The record and its idempotency key in one transaction; the key's primary key decides
    /// between concurrent creators (the loser sees [`Inserted::KeyTaken`]).
    pub(crate) fn insert_render(
        &self,
        rec: &RenderRecord,
        key: Option<&NewKey<'_>>,
    ) -> Result<Inserted, StoreError> {
        let rec = rec.clone();
        let key = key.map(|k| {
            (
                k.principal.to_string(),
                k.key.to_string(),
                k.entry.clone(),
                k.stale_before,
            )
        });
        self.call(move |c| {
            Box::pin(async move {
                let tx = c.transaction().await.map_err(pg_error)?;
                if let Some((principal, key, entry, stale_before)) = &key {
                    let took = tx
                        .query_opt(
                            "INSERT INTO idempotency (principal, key, render_id, args_hash, created_at)
                             VALUES ($1, $2, $3, $4, $5)
                             ON CONFLICT (principal, key) DO UPDATE SET
                                 render_id = EXCLUDED.render_id, args_hash = EXCLUDED.args_hash,
                                 created_at = EXCLUDED.created_at
                             WHERE idempotency.created_at < $6
                             RETURNING 1",
                            &[
                                principal,
                                key,
                                &entry.render_id,
                                &entry.args_hash,
                                &to_i64(entry.created_at),
                                &to_i64(*stale_before),
                            ],
                        )
                        .await
                        .map_err(pg_error)?;
                    if took.is_none() {
                        let row = tx
                            .query_one(
                                "SELECT render_id, args_hash, created_at FROM idempotency
                                 WHERE principal = $1 AND key = $2",
                                &[principal, key],
                            )
                            .await
                            .map_err(pg_error)?;
                        return Ok(Inserted::KeyTaken(idempotency_entry(&row)));
                    }
                }
                write_render(&*tx, &rec).await?;
                tx.commit().await.map_err(pg_error)?;
                Ok(Inserted::Created)
            })
        })
    }

    pub(crate) fn delete_render(&self, id: &str) -> Result<(), StoreError> {
        self.delete_renders(&[id.to_string()])
    }

    /// One statement (one commit) for every record of `ids`.
    pub(crate) fn delete_renders(&self, ids: &[String]) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM renders WHERE id = ANY($1)",
            params![ids.to_vec()],
        )?;
        Ok(())
    }

    /// Optimistic read-modify-write: `f` runs here, on the caller's thread, and the write
    /// succeeds only if nobody wrote the record since it was read (else it is re-read and `f`
    /// runs again).
    pub(crate) fn update_render<T, E>(
        &self,
        id: &str,
        f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, E>,
        emit: &dyn Fn(&RenderRecord, &RenderRecord) -> Option<OutboxEvent>,
    ) -> Result<Option<Updated<RenderRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        update::update(&Renders { store: self, emit }, id, f)
    }

    /// A render and its row version.
    fn versioned_render(&self, id: &str) -> Result<Option<(RenderRecord, i64)>, StoreError> {
        self.query_opt(
            "SELECT doc, version FROM renders WHERE id = $1",
            params![id.to_string()],
        )?
        .map(|row| Ok((doc::<RenderRecord>(id, &row, 0)?, row.get::<_, i64>(1))))
        .transpose()
    }

    /// Writes `rec` if its row is still at `version`, and `event` into the outbox in the same
    /// transaction; whether it was.
    fn write_if_version(
        &self,
        rec: &RenderRecord,
        version: i64,
        event: Option<OutboxEvent>,
    ) -> Result<bool, StoreError> {
        let new = rec.clone();
        let written = self.call(move |c| {
            Box::pin(async move {
                let tx = c.transaction().await.map_err(pg_error)?;
                let n = tx
                    .execute(
                        "UPDATE renders SET doc = $2, state = $3, principal = $4,
                         version = version + 1
                     WHERE id = $1 AND version = $5",
                        &[
                            &new.id,
                            &Json(&new),
                            &new.state.as_str(),
                            &new.principal,
                            &version,
                        ],
                    )
                    .await
                    .map_err(pg_error)?;
                if n == 1
                    && let Some(event) = &event
                {
                    super::outbox::insert_event(&tx, event).await?;
                }
                tx.commit().await.map_err(pg_error)?;
                Ok(n)
            })
        })?;
        Ok(written == 1)
    }

    pub(crate) fn get_idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> Result<Option<IdempotencyEntry>, StoreError> {
        Ok(self
            .query_opt(
                "SELECT render_id, args_hash, created_at FROM idempotency
                     WHERE principal = $1 AND key = $2",
                params![principal.to_string(), key.to_string()],
            )?
            .map(|row| idempotency_entry(&row)))
    }

    pub(crate) fn put_idempotency(
        &self,
        principal: &str,
        key: &str,
        entry: &IdempotencyEntry,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO idempotency (principal, key, render_id, args_hash, created_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (principal, key) DO UPDATE SET render_id = EXCLUDED.render_id,
                         args_hash = EXCLUDED.args_hash, created_at = EXCLUDED.created_at",
            params![
                principal.to_string(),
                key.to_string(),
                entry.render_id.clone(),
                entry.args_hash.clone(),
                to_i64(entry.created_at),
            ],
        )?;
        Ok(())
    }

    pub(crate) fn remove_idempotency_before(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        let n = self.execute(
            "DELETE FROM idempotency WHERE created_at < $1",
            params![to_i64(cutoff_ms)],
        )?;
        Ok(n as usize)
    }

    pub(crate) fn idempotency_len(&self) -> Result<usize, StoreError> {
        let row = self.query_one("SELECT count(*) FROM idempotency", params![])?;
        Ok(row.get::<_, i64>(0) as usize)
    }

    pub(crate) fn get_asset(&self, id: &str) -> Result<Option<AssetRecord>, StoreError> {
        self.query_opt(
            "SELECT doc FROM assets WHERE id = $1",
            params![id.to_string()],
        )?
        .map(|row| doc(id, &row, 0))
        .transpose()
    }

    pub(crate) fn put_asset(&self, rec: &AssetRecord) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO assets (id, doc) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc",
            params![rec.id.clone(), Json(rec.clone())],
        )?;
        Ok(())
    }

    pub(crate) fn assets_named(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let rows = self.query(
            "SELECT id FROM assets WHERE id = ANY($1)",
            params![ids.to_vec()],
        )?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    pub(crate) fn delete_asset(&self, id: &str) -> Result<bool, StoreError> {
        let n = self.execute("DELETE FROM assets WHERE id = $1", params![id.to_string()])?;
        Ok(n > 0)
    }

    // ---- browser session epochs ----

    /// One primary-key read (a principal without a row is at epoch 0).
    pub(crate) fn session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        let row = self.query_opt(
            "SELECT epoch FROM session_epochs WHERE principal = $1",
            params![principal.to_string()],
        )?;
        Ok(row.map_or(0, |r| r.get::<_, i64>(0).max(0) as u64))
    }

    /// Adds one atomically (concurrent bumps on any node each count); committed on return.
    pub(crate) fn bump_session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        let row = self.query_one(
            "INSERT INTO session_epochs (principal, epoch) VALUES ($1, 1)
                         ON CONFLICT (principal) DO UPDATE SET epoch = session_epochs.epoch + 1
                         RETURNING epoch",
            params![principal.to_string()],
        )?;
        Ok(row.get::<_, i64>(0).max(0) as u64)
    }

    // ---- shared secrets ----

    /// The secret `name`: the one stored, or `fresh` stored now when there is none (the first
    /// node's insert wins; every node reads the same value back). Committed on return.
    pub(crate) fn server_secret(&self, name: &str, fresh: &[u8]) -> Result<Vec<u8>, StoreError> {
        let (name, fresh) = (name.to_string(), fresh.to_vec());
        self.call(move |c| {
            Box::pin(async move {
                c.execute(
                    "INSERT INTO server_secrets (name, value) VALUES ($1, $2)
                     ON CONFLICT (name) DO NOTHING",
                    &[&name, &fresh],
                )
                .await
                .map_err(pg_error)?;
                let row = c
                    .query_one("SELECT value FROM server_secrets WHERE name = $1", &[&name])
                    .await
                    .map_err(pg_error)?;
                Ok(row.get::<_, Vec<u8>>(0))
            })
        })
    }
}

/// `INSERT` of a new render row (a duplicate id is an error).
async fn write_render(
    c: &impl tokio_postgres::GenericClient,
    rec: &RenderRecord,
) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO renders (id, principal, state, created_at, doc)
         VALUES ($1, $2, $3, $4, $5)",
        &[
            &rec.id,
            &rec.principal,
            &rec.state.as_str(),
            &to_i64(rec.created_at),
            &Json(rec),
        ],
    )
    .await
    .map_err(pg_error)?;
    Ok(())
}

/// The `renders` table as [`update::update`] sees it: a write checked against the row's
/// `version`, with the change's outbox event (if `emit` makes one) in the same transaction.
/// `f` runs on the caller's thread, between the read and the write.
struct Renders<'a> {
    store: &'a PgStore,
    emit: &'a dyn Fn(&RenderRecord, &RenderRecord) -> Option<OutboxEvent>,
}

impl Versioned for Renders<'_> {
    type Record = RenderRecord;
    type Version = i64;

    fn read(&self, id: &str) -> Result<Option<(RenderRecord, i64)>, StoreError> {
        self.store.versioned_render(id)
    }

    fn copy(&self, _: &str, rec: &RenderRecord, _: &i64) -> Result<RenderRecord, StoreError> {
        Ok(rec.clone())
    }

    fn write_if(
        &self,
        _: &str,
        version: &i64,
        old: &RenderRecord,
        rec: &RenderRecord,
    ) -> Result<bool, StoreError> {
        let event = (self.emit)(old, rec);
        self.store.write_if_version(rec, *version, event)
    }
}
