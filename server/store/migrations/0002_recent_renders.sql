-- The dashboard's newest renders, one principal's or everyone's, without a scan.
CREATE INDEX renders_recent ON renders (principal, created_at DESC);
CREATE INDEX renders_created ON renders (created_at DESC);
