CREATE OR REPLACE VIEW ledger_counts AS SELECT workspace, currency, count(*) AS n FROM ledgers GROUP BY workspace, currency;
