-- migrate:up
CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL);
CREATE FUNCTION ledger_label(l ledgers) RETURNS text LANGUAGE sql AS $$
-- migrate:down
SELECT l.workspace || '#' || l.id
$$;

-- migrate:down
DROP FUNCTION ledger_label(ledgers);
DROP TABLE ledgers;
