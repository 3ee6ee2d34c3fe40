-- Segment-parallel rendering (issue #41, server/store/src/segment.rs): a long render cut into
-- segments, each a durable work item any node may claim under a lease. One row per segment, the
-- whole record in columns (the store changes its fields in SQL: claims, renewals, fenced writes):
-- `attempts` counts claims and is the fencing token of the holder's writes; the lease
-- (`lease_owner`, `lease_until`) is Unix ms by the database's clock, as for renders.
CREATE TABLE segments (
    render_id     text             NOT NULL,
    idx           bigint           NOT NULL,
    count         bigint           NOT NULL,
    principal     text             NOT NULL,
    start_pts     bigint,
    end_pts       bigint,
    start_seconds double precision NOT NULL,
    end_seconds   double precision NOT NULL,
    frames        bigint           NOT NULL,
    state         text             NOT NULL
        CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts      bigint           NOT NULL DEFAULT 0,
    frames_done   bigint           NOT NULL DEFAULT 0,
    output        text,
    error         text,
    created_at    bigint           NOT NULL,
    lease_owner   text,
    lease_until   bigint,
    PRIMARY KEY (render_id, idx)
);
-- Claims scan only what a worker could take, oldest first; the fairness count reads only
-- running segments.
CREATE INDEX segments_claimable ON segments (created_at, render_id, idx)
    WHERE state IN ('queued', 'running');
CREATE INDEX segments_running ON segments (render_id) WHERE state = 'running';
CREATE INDEX segments_owner ON segments (lease_owner) WHERE state = 'running';

-- Each node's heartbeat of its idle render slots, valid until `until` (Unix ms, database clock):
-- the farm's free slots are the sum over live rows (whether a render is worth splitting).
CREATE TABLE node_slots (
    node  text   PRIMARY KEY,
    idle  bigint NOT NULL,
    until bigint NOT NULL
);
