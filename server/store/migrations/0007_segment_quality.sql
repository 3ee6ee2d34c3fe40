-- Quality reports (issue #51): a done segment's measurements, second by second
-- (server/store/src/quality.rs `StoredTally`), kept until the join merges them into the render's
-- figures. NULL for segments of renders that do not measure quality and for rows written before.
-- A render's own figures live in its record (`tasks.doc`, the outcome's `quality`): no column.
ALTER TABLE segments ADD COLUMN quality jsonb;
