//! The schema: `server/store/migrations/*.sql`, applied at start-up by [`refinery`] (history
//! in `refinery_schema_history`), on a connection of its own holding an advisory lock, so
//! nodes starting together apply each migration once; then, under the same lock, the render
//! indexes built concurrently (`indexes.rs`).
//!
//! Databases migrated before by vidforge's own runner record their versions in
//! `vidforge_migrations` only. The bridge ([`bridge`]) copies those into refinery's history,
//! with the checksum refinery computes for the same file (the files are never edited), so
//! refinery finds them applied and runs only what is new. `vidforge_migrations` is kept
//! complete too ([`record_legacy`]), so a build from before the switch, started on a newer
//! schema, still refuses it.

use refinery::error::Kind;
use refinery::{Migration, Runner};
use tokio_postgres::{Client, NoTls};

use super::{StoreError, classify, pg_error};

/// The schema, in order. Never edit an applied one (refinery checks its checksum): add the
/// next.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "tasks", include_str!("../../migrations/0001_tasks.sql")),
    (
        2,
        "recent_renders",
        include_str!("../../migrations/0002_recent_renders.sql"),
    ),
    (
        3,
        "session_epochs",
        include_str!("../../migrations/0003_session_epochs.sql"),
    ),
    (
        4,
        "server_secrets",
        include_str!("../../migrations/0004_server_secrets.sql"),
    ),
    (
        5,
        "webhook_outbox",
        include_str!("../../migrations/0005_webhook_outbox.sql"),
    ),
    (
        6,
        "segments",
        include_str!("../../migrations/0006_segments.sql"),
    ),
    (
        7,
        "segment_quality",
        include_str!("../../migrations/0007_segment_quality.sql"),
    ),
];

/// Advisory lock key serialising migrations between nodes ("vidf").
const MIGRATION_LOCK: i64 = 0x7669_6466;
/// How often a node waiting for another's migrations asks for their lock again.
const LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(100);
/// refinery's history table (its default name) and the DDL it creates it with.
const HISTORY_DDL: &str = "CREATE TABLE IF NOT EXISTS refinery_schema_history(
             version INT4 PRIMARY KEY,
             name VARCHAR(255),
             applied_on VARCHAR(255),
             checksum VARCHAR(255));";
/// The history kept by vidforge's own runner before refinery.
const LEGACY_DDL: &str = "CREATE TABLE IF NOT EXISTS vidforge_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())";

/// [`MIGRATIONS`] as refinery's.
pub(super) fn migrations() -> Result<Vec<Migration>, StoreError> {
    MIGRATIONS
        .iter()
        .map(|(version, name, sql)| {
            Migration::unapplied(&format!("V{version}__{name}"), sql)
                .map_err(|e| StoreError::Config(format!("migration {version}: {e}")))
        })
        .collect()
}

/// Applies the migrations this database has not seen, on a connection of its own (the
/// advisory lock ends with it). A database with a migration this build does not know is
/// refused: an older build would misread it.
pub(super) async fn migrate(config: tokio_postgres::Config) -> Result<(), StoreError> {
    let (mut client, connection) = config.connect(NoTls).await.map_err(pg_error)?;
    let driver = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "migration connection ended");
        }
    });
    let out = migrate_on(&mut client).await;
    drop(client);
    let _ = driver.await;
    out
}

async fn migrate_on(client: &mut Client) -> Result<(), StoreError> {
    // Taken by polling, never by waiting inside a statement: a node blocked in
    // `pg_advisory_lock` holds a snapshot the holder's concurrent index builds would wait for
    // (a deadlock).
    while !client
        .query_one("SELECT pg_try_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg_error)?
        .get::<_, bool>(0)
    {
        tokio::time::sleep(LOCK_POLL).await;
    }
    let migrations = migrations()?;
    bridge(client, &migrations).await?;
    let report = Runner::new(&migrations)
        .set_grouped(true)
        .set_abort_divergent(true)
        .set_abort_missing(true)
        .run_async(client)
        .await
        .map_err(migration_error)?;
    for m in report.applied_migrations() {
        tracing::info!(
            version = m.version(),
            name = m.name(),
            "applied store migration"
        );
    }
    record_legacy(client).await?;
    super::indexes::ensure(client).await?;
    client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg_error)?;
    Ok(())
}

/// Records in refinery's history every migration `vidforge_migrations` has and it lacks
/// (the database was migrated by vidforge's own runner), and refuses a schema newer than
/// this build. One transaction; the caller holds the advisory lock.
pub(super) async fn bridge(client: &mut Client, known: &[Migration]) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(pg_error)?;
    tx.batch_execute(&format!("{LEGACY_DDL}; {HISTORY_DDL}"))
        .await
        .map_err(pg_error)?;
    let newest = tx
        .query_one(
            "SELECT greatest((SELECT max(version) FROM vidforge_migrations),
                             (SELECT max(version) FROM refinery_schema_history))",
            &[],
        )
        .await
        .map_err(pg_error)?
        .get::<_, Option<i32>>(0);
    let latest = known.iter().map(|m| m.version() as i32).max().unwrap_or(0);
    if let Some(newer) = newest.filter(|v| *v > latest) {
        return Err(StoreError::Config(format!(
            "the database's schema is at migration {newer}, newer than this build knows \
             ({latest}); run the newer vidforge"
        )));
    }
    let rows = tx
        .query(
            "SELECT version, name,
                    to_char(applied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')
             FROM vidforge_migrations
             WHERE version NOT IN (SELECT version FROM refinery_schema_history)
             ORDER BY version",
            &[],
        )
        .await
        .map_err(pg_error)?;
    for row in rows {
        let (version, name, applied_on): (i32, String, String) =
            (row.get(0), row.get(1), row.get(2));
        let Some(m) = known.iter().find(|m| m.version() as i32 == version) else {
            return Err(StoreError::Config(format!(
                "the database records migration {version} ({name}), which this build lacks"
            )));
        };
        if m.name() != name {
            return Err(StoreError::Config(format!(
                "the database's migration {version} is {name:?}, this build's is {:?}",
                m.name()
            )));
        }
        tx.execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
             VALUES ($1, $2, $3, $4)",
            &[&version, &name, &applied_on, &m.checksum().to_string()],
        )
        .await
        .map_err(pg_error)?;
        tracing::info!(
            version,
            name,
            "store migration recorded in refinery's history"
        );
    }
    tx.commit().await.map_err(pg_error)
}

/// Keeps `vidforge_migrations` complete (what refinery applied is added), for builds from
/// before refinery.
async fn record_legacy(client: &mut Client) -> Result<(), StoreError> {
    client
        .execute(
            "INSERT INTO vidforge_migrations (version, name)
             SELECT version, name FROM refinery_schema_history
             ON CONFLICT (version) DO NOTHING",
            &[],
        )
        .await
        .map_err(pg_error)?;
    Ok(())
}

fn migration_error(e: refinery::Error) -> StoreError {
    match e.kind() {
        Kind::Connection(what, source) => match source.downcast_ref::<tokio_postgres::Error>() {
            Some(pg) => match classify(pg) {
                StoreError::Postgres(m) => StoreError::Postgres(format!("{what}: {m}")),
                other => other,
            },
            None => StoreError::Postgres(format!("{e}")),
        },
        _ => StoreError::Config(format!("store migrations: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::{MIGRATIONS, migrations};

    #[test]
    fn every_migration_has_a_refinery_name_and_a_stable_checksum() {
        let ms = migrations().unwrap();
        assert_eq!(ms.len(), MIGRATIONS.len());
        for (m, (version, name, _)) in ms.iter().zip(MIGRATIONS) {
            assert_eq!((m.version() as i32, m.name()), (*version, *name));
        }
        // The checksum is refinery's (SipHash-1-3 of name, version and SQL): a database that
        // recorded one keeps matching it while the file is unchanged.
        let again = migrations().unwrap();
        assert!(
            ms.iter()
                .zip(&again)
                .all(|(a, b)| a.checksum() == b.checksum())
        );
    }
}
