-- Every instance keeps a small cache of verified credentials (src/modules/accounts/credential-cache.ts)
-- and must drop an entry the moment what it was built from changes: the credential, its principal,
-- the principal's policy or the account. These triggers announce each such change on the channel
-- `credentials_changed`; the payload names what to drop:
--   {"secretId": …}                      one credential;
--   {"accountId": …, "principalId": …}   every credential of a principal (principal or policy change);
--   {"accountId": …}                     every credential of an account;
--   {}                                   everything (TRUNCATE).
-- A notification is sent when the writing transaction commits, and only then; identical payloads of
-- one transaction are sent once. The channel name and payloads are part of the service's contract
-- with its own older and newer instances: change them only together with the listener.

CREATE FUNCTION notify_credentials_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  affected jsonb;
BEGIN
  IF TG_LEVEL = 'STATEMENT' THEN
    PERFORM pg_notify('credentials_changed', '{}');
    RETURN NULL;
  END IF;
  -- An UPDATE announces both the old and the new identity (they differ only if a key changed).
  FOREACH affected IN ARRAY CASE TG_OP
      WHEN 'INSERT' THEN ARRAY[to_jsonb(NEW)]
      WHEN 'DELETE' THEN ARRAY[to_jsonb(OLD)]
      ELSE ARRAY[to_jsonb(OLD), to_jsonb(NEW)]
    END
  LOOP
    PERFORM pg_notify('credentials_changed', (CASE TG_TABLE_NAME
      WHEN 'credentials' THEN jsonb_build_object('secretId', affected->'secret_id')
      WHEN 'accounts' THEN jsonb_build_object('accountId', affected->'account_id')
      ELSE jsonb_build_object('accountId', affected->'account_id', 'principalId', affected->'principal_id')
    END)::text);
  END LOOP;
  RETURN NULL;
END
$$;

-- Recording a use (last_used_time, at most once a minute per credential) changes nothing a cached
-- entry is checked against, so it is not announced: otherwise every busy credential would be
-- dropped from every instance's cache once a minute. The row is compared without that column, so a
-- column added later is announced without touching this trigger.
CREATE TRIGGER credentials_changed_insert_delete AFTER INSERT OR DELETE ON credentials
  FOR EACH ROW EXECUTE FUNCTION notify_credentials_changed();
CREATE TRIGGER credentials_changed_update AFTER UPDATE ON credentials
  FOR EACH ROW WHEN ((to_jsonb(OLD) - 'last_used_time') IS DISTINCT FROM (to_jsonb(NEW) - 'last_used_time'))
  EXECUTE FUNCTION notify_credentials_changed();
CREATE TRIGGER credentials_changed_truncate AFTER TRUNCATE ON credentials
  FOR EACH STATEMENT EXECUTE FUNCTION notify_credentials_changed();

CREATE TRIGGER principals_changed AFTER INSERT OR UPDATE OR DELETE ON principals
  FOR EACH ROW EXECUTE FUNCTION notify_credentials_changed();
CREATE TRIGGER principals_changed_truncate AFTER TRUNCATE ON principals
  FOR EACH STATEMENT EXECUTE FUNCTION notify_credentials_changed();

CREATE TRIGGER policies_changed AFTER INSERT OR UPDATE OR DELETE ON policies
  FOR EACH ROW EXECUTE FUNCTION notify_credentials_changed();
CREATE TRIGGER policies_changed_truncate AFTER TRUNCATE ON policies
  FOR EACH STATEMENT EXECUTE FUNCTION notify_credentials_changed();

-- A new account has no cached credential yet; an update is announced so that a future account-level
-- switch (a status, say) takes effect without another migration.
CREATE TRIGGER accounts_changed AFTER UPDATE OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION notify_credentials_changed();
CREATE TRIGGER accounts_changed_truncate AFTER TRUNCATE ON accounts
  FOR EACH STATEMENT EXECUTE FUNCTION notify_credentials_changed();
