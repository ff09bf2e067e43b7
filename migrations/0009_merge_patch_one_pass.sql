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

-- apply_state_deltas folds the deltas of an append (or of a replay) key by key (same signature, same
-- answer as 0004's). 0004 applied them one after the other, each writing a new copy of the whole
-- state, so an append of n events wrote the state n times. A step touches only the top-level keys
-- of its delta, and a key's value after it depends only on that key's value before, in both modes;
-- so each key touched is folded alone through the steps, in order, and the state is written once
-- for all of them, at most twice like jsonb_merge_patch. That holds while the state is an object
-- and every step that counts has an object delta; any other input (never sent by the service) goes
-- through 0004's loop, unchanged, as does a single step.
CREATE OR REPLACE FUNCTION apply_state_deltas(state jsonb, deltas jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  step jsonb;
  merged jsonb;
  one record;
  folding_key text;
  folded jsonb; -- the key's value so far; SQL NULL while it has none
  fold_by_key boolean;
  removed text[] := '{}';
  written_keys text[] := '{}';
  written_values jsonb[] := '{}';
BEGIN
  IF jsonb_typeof(deltas) = 'array' THEN
    -- Detoasted once, as in jsonb_merge_patch; an object exactly when the state is one.
    merged := state || '{}'::jsonb;
    IF jsonb_typeof(merged) = 'object' THEN
      SELECT count(*) >= 2 AND bool_and(coalesce(jsonb_typeof(s.step -> 'delta') = 'object', false)) INTO fold_by_key
      FROM jsonb_array_elements(deltas) AS s(step) WHERE jsonb_typeof(s.step) = 'object';
    END IF;
  END IF;
  IF NOT coalesce(fold_by_key, false) THEN
    FOR step IN SELECT value FROM jsonb_array_elements(deltas) LOOP
      CONTINUE WHEN jsonb_typeof(step) <> 'object';
      IF step ->> 'mode' = 'replace' THEN
        state := state || (step -> 'delta');
      ELSE
        state := jsonb_merge_patch(state, step -> 'delta');
      END IF;
    END LOOP;
    RETURN state;
  END IF;

  FOR one IN
    SELECT d.key, d.value, coalesce(s.step ->> 'mode' = 'replace', false) AS replace
    FROM jsonb_array_elements(deltas) WITH ORDINALITY AS s(step, n), jsonb_each(s.step -> 'delta') AS d
    WHERE jsonb_typeof(s.step) = 'object'
    ORDER BY d.key COLLATE "C", s.n
  LOOP
    IF folding_key IS DISTINCT FROM one.key THEN
      IF folding_key IS NOT NULL THEN
        IF folded IS NULL THEN
          removed := array_append(removed, folding_key);
        ELSE
          written_keys := array_append(written_keys, folding_key);
          written_values := array_append(written_values, folded);
        END IF;
      END IF;
      folding_key := one.key;
      folded := merged -> one.key;
    END IF;
    IF one.replace THEN
      folded := one.value;
    ELSIF jsonb_typeof(one.value) = 'null' THEN
      folded := NULL;
    ELSE
      folded := jsonb_merge_patch(folded, one.value);
    END IF;
  END LOOP;
  IF folding_key IS NOT NULL THEN
    IF folded IS NULL THEN
      removed := array_append(removed, folding_key);
    ELSE
      written_keys := array_append(written_keys, folding_key);
      written_values := array_append(written_values, folded);
    END IF;
  END IF;

  IF cardinality(removed) > 0 THEN
    merged := merged - removed;
  END IF;
  IF cardinality(written_keys) > 0 THEN
    merged := merged || (SELECT jsonb_object_agg(k, v) FROM unnest(written_keys, written_values) AS w(k, v));
  END IF;
  RETURN merged;
END
$$;
