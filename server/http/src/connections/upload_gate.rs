//! Upload slots (`max_concurrent_uploads`, `max_uploads_per_peer`): [`UploadGate`] admits an
//! upload only while fewer than that many run, on the server and from the peer's address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use vidforge_core::config::Config;

/// How many uploads run at once: on the server (`max_concurrent_uploads`) and from one peer
/// IP address (`max_uploads_per_peer`). Cheap to clone (one shared count).
#[derive(Clone, Debug)]
pub struct UploadGate {
    inner: Arc<GateInner>,
}

#[derive(Debug)]
struct GateInner {
    max: usize,
    per_peer: usize,
    running: Mutex<Running>,
}

#[derive(Debug, Default)]
struct Running {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// Why [`UploadGate::try_enter`] refused an upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UploadsBusy {
    /// `max_concurrent_uploads` uploads are running.
    #[error("{max} uploads are already in progress on this server")]
    Server { max: usize },
    /// `max_uploads_per_peer` uploads from this address are running.
    #[error("{max} uploads from this address are already in progress")]
    Peer { max: usize },
}

/// One admitted upload; its place is given back when it is dropped.
#[derive(Debug)]
pub struct UploadSlot {
    gate: Arc<GateInner>,
    peer: Option<IpAddr>,
}

impl UploadGate {
    /// At most `max` uploads at once, `per_peer` of them from one address (both at least 1).
    pub fn new(max: usize, per_peer: usize) -> UploadGate {
        UploadGate {
            inner: Arc::new(GateInner {
                max: max.max(1),
                per_peer: per_peer.max(1),
                running: Mutex::new(Running::default()),
            }),
        }
    }

    pub fn from_config(config: &Config) -> UploadGate {
        UploadGate::new(config.upload_slots(), config.max_uploads_per_peer)
    }

    /// Admits an upload from `peer` (`None`: unknown, counted only against the server's cap)
    /// or says why not; never waits.
    pub fn try_enter(&self, peer: Option<IpAddr>) -> Result<UploadSlot, UploadsBusy> {
        let gate = &self.inner;
        let mut running = gate.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.total >= gate.max {
            return Err(UploadsBusy::Server { max: gate.max });
        }
        if let Some(ip) = peer {
            let mine = running.by_peer.entry(ip).or_insert(0);
            if *mine >= gate.per_peer {
                return Err(UploadsBusy::Peer { max: gate.per_peer });
            }
            *mine += 1;
        }
        running.total += 1;
        Ok(UploadSlot {
            gate: gate.clone(),
            peer,
        })
    }

    /// Uploads running now.
    pub fn running(&self) -> usize {
        self.inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .total
    }
}

impl Drop for UploadSlot {
    fn drop(&mut self) {
        let mut running = self.gate.running.lock().unwrap_or_else(|e| e.into_inner());
        running.total = running.total.saturating_sub(1);
        if let Some(ip) = self.peer
            && let Some(n) = running.by_peer.get_mut(&ip)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.by_peer.remove(&ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upload_gate_counts_the_server_and_each_peer() {
        let gate = UploadGate::new(3, 2);
        let a: IpAddr = [127, 0, 0, 2].into();
        let b: IpAddr = [127, 0, 0, 3].into();
        let a1 = gate.try_enter(Some(a)).unwrap();
        let _a2 = gate.try_enter(Some(a)).unwrap();
        assert_eq!(
            gate.try_enter(Some(a)).unwrap_err(),
            UploadsBusy::Peer { max: 2 }
        );
        let _b1 = gate.try_enter(Some(b)).unwrap();
        assert_eq!(
            gate.try_enter(None).unwrap_err(),
            UploadsBusy::Server { max: 3 }
        );
        assert_eq!(gate.running(), 3);
        drop(a1);
        assert_eq!(gate.running(), 2);
        let _a3 = gate.try_enter(Some(a)).unwrap();
        assert_eq!(gate.running(), 3);
    }
}
