//! The render indexes over sled: the suite both backends pass (`tests/pg/render_suite.rs`),
//! then the index build a store written before the indexes gets on its first open: complete,
//! idempotent, and resumed where a killed build stopped, with the same entries as one built
//! in one go.

use std::sync::Arc;

use crate as store;
use crate::clock::SystemClock;
use crate::fixtures::write_unindexed;
use crate::sled_store::SledStore;
use crate::{Store, sled_render_build};

#[macro_use]
#[path = "../tests/pg/render_suite.rs"]
mod suite;

macro_rules! on_sled {
    ($($name:ident),+) => {
        $(
            #[test]
            fn $name() {
                let dir = tempfile::tempdir().unwrap();
                suite::$name(&Store::open(dir.path()).unwrap());
            }
        )+
    };
}

render_suite!(on_sled);

/// Every entry of the store's render index, in order.
fn index_of(s: &Store) -> Vec<Vec<u8>> {
    let tree = s.open_tree("render_index").unwrap();
    tree.iter().keys().map(|k| k.unwrap().to_vec()).collect()
}

/// Copies the sled store in `from` to `to` (files and folders).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_store_from_before_the_indexes_is_indexed_once_and_a_killed_build_resumes() {
    let records = suite::records();
    let dir = tempfile::tempdir().unwrap();
    let (whole, killed) = (dir.path().join("whole"), dir.path().join("killed"));
    write_unindexed(&whole, &records).unwrap();
    copy_dir(&whole, &killed);
    // Built in one go on open.
    let built = {
        let s = Store::open(&whole).unwrap();
        suite::reads_agree_with_a_scan(&s, &records);
        index_of(&s)
    };
    // Opening again builds nothing more and changes nothing.
    let s = Store::open(&whole).unwrap();
    assert_eq!(index_of(&s), built);
    drop(s);

    // A build killed after three batches (each flushed before its cursor), then opened again:
    // the same index as the one built in one go.
    {
        let s = SledStore::open_unbuilt(&killed, Arc::new(SystemClock)).unwrap();
        sled_render_build::build(&s, Some(3)).unwrap();
        let partial = s.render_index.len();
        assert!(partial > 10_000 && partial < built.len(), "{partial}");
    }
    let s = Store::open(&killed).unwrap();
    assert_eq!(index_of(&s), built);
}
