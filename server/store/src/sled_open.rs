//! Opening the sled store: the database, then the indexes a store written before them lacks.

use std::path::Path;

use crate::StoreError;
use crate::clock::SharedClock;
use crate::sled_render_build::build;
use crate::sled_store::SledStore;

impl SledStore {
    /// Opens (or creates) the database in `dir` (see [`SledStore::open_unbuilt`]), and
    /// builds the render indexes ([`build`]) and the expiry index
    /// ([`crate::sled_expiry::build`]) when it has none yet.
    pub(crate) fn open(dir: &Path, clock: SharedClock) -> Result<SledStore, StoreError> {
        let store = SledStore::open_unbuilt(dir, clock)?;
        build(&store, None)?;
        crate::sled_expiry::build(&store)?;
        Ok(store)
    }
}
