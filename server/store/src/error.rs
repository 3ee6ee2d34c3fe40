//! The store's faults.

use std::path::PathBuf;

/// Store faults.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the database at {} is locked by another process (is `vidforge serve` running with this \
         data dir? stop it, or use `vidforge assets add --server URL`)",
        path.display()
    )]
    Locked { path: PathBuf },
    #[error("database error: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt record {key}: {source}")]
    Decode {
        key: String,
        source: serde_json::Error,
    },
    #[error("cannot encode record: {0}")]
    Encode(serde_json::Error),
    /// The database cannot be reached (PostgreSQL down or restarting): temporary.
    #[error("the task store is unavailable: {0}")]
    Unavailable(String),
    /// PostgreSQL refused a statement.
    #[error("database error: {0}")]
    Postgres(String),
    /// A bad `--store` URL, or a schema this build cannot use.
    #[error("task store: {0}")]
    Config(String),
    /// What only one of the backends has (an extension's own trees: sled; the shared work
    /// queue: PostgreSQL).
    #[error("{0} is not available with this store backend")]
    Unsupported(&'static str),
    /// A request the store refuses (segments given for another render, a repeated index).
    #[error("invalid store request: {0}")]
    Invalid(String),
    #[error("cannot start the store's threads: {0}")]
    Io(#[from] std::io::Error),
}

impl StoreError {
    /// The operating system's error when the embedded database failed at I/O (a full disk,
    /// say); `None` for every other fault.
    pub fn io(&self) -> Option<&std::io::Error> {
        match self {
            StoreError::Sled(sled::Error::Io(io)) => Some(io),
            _ => None,
        }
    }
}
