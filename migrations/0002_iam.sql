-- Access control: a policy per sub-account, and an encrypted copy of each secret for the later
-- signature-based authentication (only when a master key is configured; never the plain secret).

CREATE TABLE policies (
  account_id    text NOT NULL,
  principal_id  text NOT NULL,
  statements    jsonb NOT NULL,
  update_time   timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  PRIMARY KEY (account_id, principal_id),
  FOREIGN KEY (account_id, principal_id) REFERENCES principals (account_id, principal_id) ON DELETE CASCADE
);

ALTER TABLE credentials ADD COLUMN secret_encrypted bytea;
