CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL);
