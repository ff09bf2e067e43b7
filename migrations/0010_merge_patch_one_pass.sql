-- jsonb_merge_patch in one pass over the patch (same signature, same answer as 0004's).
--
-- 0004's version changed the merged object key by key: every key of the patch ran `merged || {key}`
-- or `merged - key`, and each of those writes a new copy of the whole object. A patch of k keys over
-- a state of s bytes cost O(k × s): 5,000 keys over a 900 kB state took ~4 s in the function alone
-- (bench/README.md, "Merge of a large delta").
--
-- Here the keys of the patch are read once: the keys it removes (null) go into one array, the values
-- it writes into one object (an object value merged recursively into what is there, only where the
-- patch has an object), and the state is written twice at most: once without the removed keys, once
-- with the written ones. Each key of a patch appears once, so the order in which the keys are applied
-- never mattered, and jsonb keeps one canonical form for an object: the result is the same value,
-- byte for byte, as 0004's. test/integration/merge-patch-sql.test.ts and merge-large-delta.test.ts
-- hold it to the TypeScript applyMergePatch.
CREATE OR REPLACE FUNCTION jsonb_merge_patch(target jsonb, patch jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  merged jsonb;
  removed text[];
  written jsonb;
BEGIN
  IF patch IS NULL OR jsonb_typeof(patch) <> 'object' THEN
    RETURN patch;
  END IF;
  -- `|| '{}'` hands back the object itself, detoasted: a variable holding a TOAST pointer would be
  -- fetched and decompressed again at each use below (one `merged -> key` per object in the patch).
  -- Anything but an object comes out as an array here, and merges as an empty object, as in 0004.
  merged := target || '{}'::jsonb;
  IF jsonb_typeof(merged) IS DISTINCT FROM 'object' THEN
    merged := '{}'::jsonb;
  END IF;
  SELECT array_agg(p.key) FILTER (WHERE jsonb_typeof(p.value) = 'null'),
         jsonb_object_agg(p.key, CASE WHEN jsonb_typeof(p.value) = 'object' THEN jsonb_merge_patch(merged -> p.key, p.value) ELSE p.value END)
           FILTER (WHERE jsonb_typeof(p.value) <> 'null')
    INTO removed, written
    FROM jsonb_each(patch) AS p;
  IF removed IS NOT NULL THEN
    merged := merged - removed;
  END IF;
  IF written IS NOT NULL THEN
    merged := merged || written;
  END IF;
  RETURN merged;
END
$$;
