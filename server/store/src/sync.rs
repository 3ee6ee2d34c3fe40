//! Mutex locking shared by every module that keeps state behind a `Mutex`.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, ignoring poisoning (the data stays consistent: every critical section is a
/// small map update).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
