//! The durable store: the crate `vidforge-store` (the records, the sled and PostgreSQL
//! backends behind [`Store`], the webhook outbox and the cluster work queue), re-exported so
//! the domain and the fronts name it `vidforge_core::store`.

pub use vidforge_store::*;

#[cfg(test)]
pub(crate) mod tests {
    pub(crate) use vidforge_store_fixtures::sample;
}
