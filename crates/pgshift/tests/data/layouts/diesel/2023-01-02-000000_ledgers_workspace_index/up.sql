CREATE INDEX CONCURRENTLY ledgers_workspace ON ledgers (workspace);
