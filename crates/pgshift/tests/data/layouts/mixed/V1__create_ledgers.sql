CREATE TABLE ledgers (id bigint PRIMARY KEY);
