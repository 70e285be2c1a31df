-- Written to be re-runnable: on a database that already has ledgers, the CREATE does
-- nothing and the index is built on the existing (possibly large) table.
CREATE TABLE IF NOT EXISTS ledgers (id bigint PRIMARY KEY, workspace text NOT NULL);
CREATE INDEX ledgers_workspace ON ledgers (workspace);
