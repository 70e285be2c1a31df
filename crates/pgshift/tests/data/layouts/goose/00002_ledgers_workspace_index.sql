-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY ledgers_workspace ON ledgers (workspace);

-- +goose Down
DROP INDEX CONCURRENTLY ledgers_workspace;
