-- Secrets the nodes of a cluster share, made once by the first node that needs one and never
-- changed: `session` keys the MAC of browser sessions signed in through OAuth (whose principals
-- have no static token to key it) and of the sign-in flow's cookie (server/http/src/session.rs).
CREATE TABLE server_secrets (
    name  text  PRIMARY KEY,
    value bytea NOT NULL
);
