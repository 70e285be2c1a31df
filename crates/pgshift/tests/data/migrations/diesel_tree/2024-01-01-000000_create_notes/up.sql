CREATE TABLE notes (id bigint PRIMARY KEY, body text NOT NULL);
