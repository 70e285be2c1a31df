DROP INDEX CONCURRENTLY ledgers_workspace;
