-- migrate:up transaction:false
CREATE INDEX CONCURRENTLY ledgers_workspace ON ledgers (workspace);

-- migrate:down
DROP INDEX ledgers_workspace;
