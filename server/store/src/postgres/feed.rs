//! The change feed: LISTEN on a connection of its own (not the pool's), with the blocking
//! client, on the caller's thread (a plain thread that does nothing else).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

use super::{PgStore, StoreEvent};

/// The channel every node LISTENs on (the migration's trigger NOTIFYs it).
const CHANGES_CHANNEL: &str = "vidforge_renders";

impl PgStore {
    /// Blocks, reporting every committed change of a render record until `stop` is set. Runs
    /// on a connection of its own (LISTEN holds it), re-opened after a failure with a
    /// [`StoreEvent::Resync`], since notifications sent meanwhile are lost.
    pub(crate) fn watch(&self, stop: &AtomicBool, mut on_event: impl FnMut(StoreEvent)) {
        const WAIT: Duration = Duration::from_millis(250);
        let mut client: Option<Client> = None;
        while !stop.load(Ordering::SeqCst) {
            if client.as_ref().is_none_or(Client::is_closed) {
                client = self.listen();
                if client.is_some() {
                    on_event(StoreEvent::Resync);
                }
                continue;
            }
            let lost = {
                let c = client.as_mut().expect("connected above");
                let mut notes = c.notifications();
                let mut iter = notes.timeout_iter(WAIT);
                loop {
                    match iter.next() {
                        Ok(Some(n)) => on_event(StoreEvent::Changed(n.payload().to_string())),
                        Ok(None) => break false,
                        Err(e) => {
                            tracing::warn!(error = %e, "store watch: connection lost");
                            break true;
                        }
                    }
                }
            };
            if lost {
                client = None;
            }
        }
    }

    /// A new connection LISTENing on [`CHANGES_CHANNEL`]; `None` (after a second's pause)
    /// when PostgreSQL cannot be reached or refuses.
    fn listen(&self) -> Option<Client> {
        match postgres::Config::from((*self.config).clone()).connect(NoTls) {
            Ok(mut c) => match c.batch_execute(&format!("LISTEN {CHANGES_CHANNEL}")) {
                Ok(()) => return Some(c),
                Err(e) => tracing::warn!(error = %e, "LISTEN failed; retrying"),
            },
            Err(e) => tracing::debug!(error = %e, "store watch: PostgreSQL unreachable"),
        }
        std::thread::sleep(Duration::from_secs(1));
        None
    }
}
