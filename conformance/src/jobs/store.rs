//! The job records' storage: one tree of JSON records (the server's sled database).

use vidforge_core::store::{Change, ExtensionTree, StoreError, Updated, all_in, update_in};

use super::record::JobRecord;

/// The sled tree the jobs live in.
pub const JOBS_TREE: &str = "jobs";

/// The job records: one sled tree of JSON records keyed by job id. Writes are not flushed.
#[derive(Clone, Debug)]
pub struct JobStore {
    tree: ExtensionTree,
}

impl JobStore {
    pub fn new(tree: ExtensionTree) -> JobStore {
        JobStore { tree }
    }

    pub fn get(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        self.tree
            .get(id.as_bytes())?
            .map(|v| {
                serde_json::from_slice(&v).map_err(|e| StoreError::Decode {
                    key: id.to_string(),
                    source: e,
                })
            })
            .transpose()
    }

    /// Inserts or replaces a job.
    pub fn put(&self, rec: &JobRecord) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(rec).map_err(StoreError::Encode)?;
        self.tree.insert(rec.id.as_bytes(), bytes)?;
        Ok(())
    }

    pub fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.tree.remove(id.as_bytes())?;
        Ok(())
    }

    /// Compare-and-swap read-modify-write of one job ([`update_in`]).
    pub fn update<T, E>(
        &self,
        id: &str,
        f: impl FnMut(&mut JobRecord) -> Result<Change<T>, E>,
    ) -> Result<Option<Updated<JobRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        update_in(&self.tree, id, f)
    }

    /// Every job record (undecodable ones are logged and skipped).
    pub fn all(&self) -> Result<Vec<JobRecord>, StoreError> {
        all_in(&self.tree, "job")
    }
}
