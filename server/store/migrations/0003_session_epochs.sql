-- Browser sessions can be ended: one counter per principal, mixed into every session cookie's
-- MAC (server/src/session.rs). Signing out adds one, so every cookie issued before is refused
-- by every node, after restarts too. A principal without a row is at epoch 0.
CREATE TABLE session_epochs (
    principal text   PRIMARY KEY,
    epoch     bigint NOT NULL
);
