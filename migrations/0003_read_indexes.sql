-- Metadata filters of session lists, served within the space (issue 5, bench/read.ts).
--
-- 0001's GIN index on metadata alone is shared by every account and space: a lookup of
-- `env=prod` collects the matching sessions of all tenants and then throws away those of other
-- spaces, so its cost grows with the whole database; and its statistics, taken over all spaces,
-- misjudge one space's share (a filter selecting 0.1% of a space of 1,000,000 sessions was served
-- by walking 21,000 rows of the space's time index). This index keys each metadata entry by the
-- space as well, as the path space_id → key → value (jsonb_path_ops hashes whole paths): a lookup
-- reads only the entries of that space. The list query states the same expression (see
-- sessions.repository.ts, metadataInSpace) and still filters by account and space.
--
-- jsonb_set rather than jsonb_build_object: an index expression must be immutable, and
-- jsonb_build_object is only stable (its arguments may be of any type).
--
-- Built without CONCURRENTLY (migrations run in a transaction): on a large sessions table this
-- blocks writes to it for as long as the build takes (seconds per million sessions).
CREATE INDEX sessions_metadata_in_space ON sessions USING gin (jsonb_set('{}'::jsonb, ARRAY[space_id], metadata) jsonb_path_ops);
DROP INDEX sessions_metadata;
