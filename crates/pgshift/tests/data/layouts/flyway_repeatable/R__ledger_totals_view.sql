CREATE OR REPLACE VIEW ledger_counts AS SELECT workspace, count(*) AS n FROM ledgers GROUP BY workspace;
