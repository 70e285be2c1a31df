CREATE INDEX ledgers_workspace ON ledgers (workspace);
