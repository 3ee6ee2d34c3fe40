-- The webhook outbox (server/core/src/store/outbox.rs): one row per event, inserted in the
-- same transaction as the render change it reports, so no committed change loses its event.
-- `doc` is the whole record (the same JSON the sled store keeps); beside it the columns the
-- delivery queries need: `status` (pending | delivered | dropped), when the next attempt is
-- due and who holds the current one (`lease_owner`, `lease_until`), all times Unix ms by the
-- database's clock, so exactly one node makes each attempt whatever the nodes' clocks say.
CREATE TABLE webhook_outbox (
    id              text   PRIMARY KEY,
    principal       text   NOT NULL,
    status          text   NOT NULL,
    created_at      bigint NOT NULL,
    next_attempt_at bigint NOT NULL,
    finished_at     bigint,
    lease_owner     text,
    lease_until     bigint,
    doc             jsonb  NOT NULL
);
-- Claims read only pending events, by due time.
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at) WHERE status = 'pending';
-- The dashboard's newest events per principal; the sweeper's finished ones.
CREATE INDEX webhook_outbox_principal ON webhook_outbox (principal, id);
CREATE INDEX webhook_outbox_finished ON webhook_outbox (finished_at) WHERE status <> 'pending';
