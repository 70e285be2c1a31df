-- latin1.sql: valid SQL, but encoded in ISO-8859-1 (not UTF-8): the byte 0xE9 (é) follows.
-- café
CREATE TABLE cafés (id int PRIMARY KEY, nom text NOT NULL DEFAULT 'café');
SELECT 'déjà vu' AS phrase;
