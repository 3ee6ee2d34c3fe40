//! Read-modify-write of one record, the one loop every backend shares: read the record and
//! what its write is conditional on, let the caller's closure change a copy, write it only if
//! the stored record is still the one read (else read again and run the closure again). The
//! backends differ only in that conditional write ([`Versioned`]): sled compares and swaps the
//! stored bytes, PostgreSQL checks the row's version. Plus the JSON encoding of records and
//! the helpers for any sled tree of JSON records (an MCP extension's own included).

use serde::{Deserialize, Serialize};

use crate::StoreError;

/// What an update closure decided.
pub enum Change<T> {
    /// Store the modified record.
    Write(T),
    /// Leave the stored record as it was (modifications are discarded).
    Keep(T),
}

/// The result of [`crate::Store::update_render`] and [`update_in`].
pub struct Updated<R, T> {
    /// The record as stored after the update.
    pub record: R,
    pub value: T,
    /// Whether a write happened.
    pub written: bool,
}

/// A record as read and its version; `None` when there is none.
pub(crate) type Found<R, V> = Option<(R, V)>;

/// A backend's primitives for [`update`]: a read that also yields what the write is
/// conditional on, and the conditional write.
pub(crate) trait Versioned {
    type Record;
    /// What a write is conditional on (the stored bytes, a row version).
    type Version;

    /// The stored record `id` and its version; `None` when there is none.
    fn read(&self, id: &str) -> Result<Found<Self::Record, Self::Version>, StoreError>;

    /// A copy of `rec` (read at `version`) for the closure to change.
    fn copy(
        &self,
        id: &str,
        rec: &Self::Record,
        version: &Self::Version,
    ) -> Result<Self::Record, StoreError>;

    /// Writes `new` (changed from `old`) if the record is still at `version`; whether it was.
    fn write_if(
        &self,
        id: &str,
        version: &Self::Version,
        old: &Self::Record,
        new: &Self::Record,
    ) -> Result<bool, StoreError>;
}

/// The read-modify-write loop (see the module doc). `f` may run more than once; `None` when
/// the record does not exist.
pub(crate) fn update<B: Versioned, T, E>(
    backend: &B,
    id: &str,
    mut f: impl FnMut(&mut B::Record) -> Result<Change<T>, E>,
) -> Result<Option<Updated<B::Record, T>>, E>
where
    E: From<StoreError>,
{
    loop {
        let Some((old, version)) = backend.read(id)? else {
            return Ok(None);
        };
        let mut rec = backend.copy(id, &old, &version)?;
        match f(&mut rec)? {
            Change::Keep(value) => {
                return Ok(Some(Updated {
                    record: old,
                    value,
                    written: false,
                }));
            }
            Change::Write(value) => {
                if backend.write_if(id, &version, &old, &rec)? {
                    return Ok(Some(Updated {
                        record: rec,
                        value,
                        written: true,
                    }));
                }
            }
        }
    }
}

/// A sled tree of JSON records of type `R`, compared and swapped by their stored bytes.
struct Tree<'a, R> {
    tree: &'a sled::Tree,
    record: std::marker::PhantomData<fn() -> R>,
}

impl<R> Versioned for Tree<'_, R>
where
    R: Serialize + for<'de> Deserialize<'de>,
{
    type Record = R;
    type Version = sled::IVec;

    fn read(&self, id: &str) -> Result<Option<(R, sled::IVec)>, StoreError> {
        let Some(old) = self.tree.get(id.as_bytes())? else {
            return Ok(None);
        };
        Ok(Some((decode(id, &old)?, old)))
    }

    fn copy(&self, id: &str, _: &R, version: &sled::IVec) -> Result<R, StoreError> {
        decode(id, version)
    }

    fn write_if(&self, id: &str, old: &sled::IVec, _: &R, new: &R) -> Result<bool, StoreError> {
        let new = encode(new)?;
        Ok(self
            .tree
            .compare_and_swap(id.as_bytes(), Some(old), Some(new))?
            .is_ok())
    }
}

/// A tree of JSON records of an MCP extension's own in the node's sled database
/// ([`crate::Store::open_tree`]; [`update_in`] and [`all_in`] work on it): sled's ordered
/// key-value tree, named here so that nothing above this crate depends on sled.
pub type ExtensionTree = sled::Tree;

/// Compare-and-swap update of one JSON record in `tree` (see [`crate::Store::update_render`]);
/// for any tree of JSON records keyed by id, an extension's own included. Not flushed.
pub fn update_in<R, T, E>(
    tree: &ExtensionTree,
    id: &str,
    f: impl FnMut(&mut R) -> Result<Change<T>, E>,
) -> Result<Option<Updated<R, T>>, E>
where
    R: Serialize + for<'de> Deserialize<'de>,
    E: From<StoreError>,
{
    let tree = Tree {
        tree,
        record: std::marker::PhantomData,
    };
    update(&tree, id, f)
}

/// Every record of `tree`; decode errors are logged and skipped so one bad record cannot stop
/// the service. `what` names the kind of record in that log line.
pub fn all_in<R: for<'de> Deserialize<'de>>(
    tree: &ExtensionTree,
    what: &str,
) -> Result<Vec<R>, StoreError> {
    decode_each(tree.iter(), what)
}

/// Every record of `items` (a sled tree's iterator or a range of it), as [`all_in`].
pub(crate) fn decode_each<R: for<'de> Deserialize<'de>>(
    items: impl Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>,
    what: &str,
) -> Result<Vec<R>, StoreError> {
    let mut out = Vec::new();
    for item in items {
        let (k, v) = item?;
        let key = String::from_utf8_lossy(&k).into_owned();
        match decode::<R>(&key, &v) {
            Ok(r) => out.push(r),
            Err(e) => tracing::error!(error = %e, "skipping undecodable {what} record"),
        }
    }
    Ok(out)
}

/// A record as stored (JSON).
pub(crate) fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(StoreError::Encode)
}

/// The stored record `key`.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(key: &str, v: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(v).map_err(|e| StoreError::Decode {
        key: key.to_string(),
        source: e,
    })
}
