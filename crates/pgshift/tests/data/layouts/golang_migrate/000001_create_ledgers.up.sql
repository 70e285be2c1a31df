CREATE TABLE IF NOT EXISTS ledgers (id bigint PRIMARY KEY, workspace text NOT NULL);
