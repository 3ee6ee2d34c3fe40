-- vidforge's PostgreSQL store, version 1: renders, idempotency keys, assets.
-- Applied by `vidforge serve --store postgres://...` at start-up (server/src/store/postgres.rs),
-- once, in a transaction, recorded in vidforge_migrations. Never edit an applied migration:
-- add the next file and list it in MIGRATIONS.

-- One row per render. `doc` is the whole record (the same JSON the sled store keeps); the
-- columns beside it are copies the queries need (state, principal, created_at), kept in step
-- by every write, plus what only a cluster has: the optimistic-concurrency `version` and the
-- work lease (`lease_owner`, `lease_until`, Unix ms).
CREATE TABLE renders (
    id          text PRIMARY KEY,
    principal   text   NOT NULL,
    state       text   NOT NULL,
    created_at  bigint NOT NULL,
    doc         jsonb  NOT NULL,
    version     bigint NOT NULL DEFAULT 0,
    lease_owner text,
    lease_until bigint
);
-- Claims scan only what a worker could take.
CREATE INDEX renders_runnable ON renders (created_at)
    WHERE state IN ('queued', 'rendering', 'previewing');
-- Unfinished renders (the index every node keeps) and per-principal quotas.
CREATE INDEX renders_unfinished ON renders (principal)
    WHERE state IN ('queued', 'rendering', 'previewing', 'awaiting_approval');

-- Every node LISTENs on `vidforge_renders`: each committed change of a record (not of its
-- lease) names the render, so push notifications and every node's index follow renders that
-- other nodes run. NOTIFY is delivered at commit, in commit order.
CREATE FUNCTION vidforge_render_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('vidforge_renders', NEW.id);
    RETURN NEW;
END
$$;
CREATE TRIGGER renders_changed AFTER INSERT OR UPDATE OF doc ON renders
    FOR EACH ROW EXECUTE FUNCTION vidforge_render_changed();

-- Idempotency keys are unique per principal by the primary key, not by a read-then-write.
CREATE TABLE idempotency (
    principal  text   NOT NULL,
    key        text   NOT NULL,
    render_id  text   NOT NULL,
    args_hash  text   NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_created ON idempotency (created_at);

CREATE TABLE assets (
    id  text PRIMARY KEY,
    doc jsonb NOT NULL
);
