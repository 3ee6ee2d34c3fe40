//! The durable store: the truth about every render; the worker pool and every read path
//! derive their state from it. Two backends behind one [`Store`]:
//!
//! - **sled** (`sled_store.rs`, the default): one embedded database in the data dir, for one
//!   node. An MCP extension (see `vidforge_mcp::extension`) may open trees of its own in it
//!   ([`Store::open_tree`]) and keep JSON records there with [`update_in`] and [`all_in`].
//! - **PostgreSQL** (`postgres.rs`, `--store postgres://…`): shared by every node of a
//!   cluster, with the work queue's leases ([`Store::claim`]) and a change feed
//!   ([`Store::watch`]) on top.
//!
//! The record types are in `render.rs`, `asset.rs`, `outbox.rs` and `segment.rs` (a render
//! split into segments that any node claims under a lease; the [`Store`]'s segment methods
//! in `store_segments.rs`), re-exported here. Both backends keep the same JSON; a record
//! update is one read-modify-write loop (`update.rs`) over each backend's conditional write.
//! Render records are indexed (`render_index.rs`: a principal's newest, the unfinished, the
//! finished by expiry), in the record's own write, so no read costs in proportion to every
//! record kept; a store from before the indexes gets them at its first open.
//!
//! sled makes a write durable only at `flush` (it flushes in the background every 500 ms);
//! PostgreSQL at every commit. Callers flush ([`Store::flush`]) after every write a client may
//! rely on, before answering. Progress updates are the exception: losing the last few is
//! harmless.
//!
//! Beside the store, the leaf modules its records and backends need, which the domain
//! (`vidforge-core`) re-exports under the same names: [`catalog`] (error codes and their
//! wording, the default lifetimes), [`clock`], [`ids`], [`side_runtime`] and [`sync`].

/// Calls the same method on whichever backend this is.
macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match &$self.backend {
            Backend::Sled($s) => $e,
            Backend::Postgres($s) => $e,
        }
    };
}

pub mod catalog;
pub mod clock;
pub mod ids;
pub mod side_runtime;
pub mod sync;

mod asset;
pub mod by_name;
mod error;
mod handle;
mod metrics;
mod outbox;
mod postgres;
mod quality;
mod render;
mod render_index;
mod segment;
mod sled_expiry;
mod sled_keys;
mod sled_open;
mod sled_render_build;
mod sled_renders;
mod sled_segments;
mod sled_store;
mod store_segments;
mod update;

// The tests' sample records (`fixtures/`, the crate `vidforge-store-fixtures` elsewhere): here
// the same file, over this crate, so the records are of the crate under test.
#[cfg(test)]
extern crate self as vidforge_store;
#[cfg(test)]
#[allow(dead_code)] // some samples serve other crates' tests only
#[path = "../fixtures/src/lib.rs"]
mod fixtures;
#[cfg(test)]
mod render_index_tests;
#[cfg(test)]
mod segment_tests;
#[cfg(test)]
mod tests;

pub use crate::postgres::{Claim, MIGRATIONS, StoreEvent};
pub use asset::*;
pub use error::StoreError;
pub use handle::{Inserted, NewKey, Store};
pub use outbox::*;
pub use quality::{Figures, QualityFigures, SegmentFigures, StoredTally, WorstFigures};
pub use render::*;
pub use render_index::{ExpiryCursor, Retained};
pub use segment::{SegmentHold, SegmentRecord, SegmentSpan, SegmentState};
pub use update::{Change, ExtensionTree, Updated, all_in, update_in};
