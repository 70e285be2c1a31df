-- hostile_identifiers.sql: valid SQL (PostgreSQL 14+) whose quoted identifiers contain
-- double quotes, spaces, unicode, reserved words, a 63-byte name and names longer than
-- 63 bytes. It must parse, and it runs on a server in an empty schema (PostgreSQL
-- truncates the long names with a NOTICE "identifier ... will be truncated to ...").
--   63 bytes, kept as is:          relay_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_63bytes
--   70 bytes, becomes (63 bytes):  relay_yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy_
--   65 bytes (UTF-8, 2-byte é), becomes 63 bytes on a character boundary: éééééééééééééééééééééééééééééééz

CREATE TABLE "select" (
    "from"          int PRIMARY KEY,
    "a""b"          text,
    "my column"     text,
    "événement"     text,
    "日本語の列"     text,
    "🚀 launch"     timestamptz,
    "user"          text,
    "table"         int,
    " leading and trailing spaces " text,
    "UPPER"         int,
    upper           int
);

CREATE TABLE "relay_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_63bytes" (id int PRIMARY KEY);
CREATE TABLE "relay_yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy_70bytes" (id int PRIMARY KEY);
CREATE TABLE "ééééééééééééééééééééééééééééééézé" (id int PRIMARY KEY);

CREATE INDEX "index with ""quotes"" and spaces" ON "select" ("my column", "a""b");
CREATE INDEX "idx_relay_yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy_70bytes" ON "select" ("user");

ALTER TABLE "select" ADD CONSTRAINT "check: ""table"" >= 0" CHECK ("table" >= 0);
ALTER TABLE "select" RENAME COLUMN "a""b" TO "a""b""c";
ALTER TABLE "select" ADD COLUMN "column" text DEFAULT 'it''s ''quoted''';

COMMENT ON TABLE "select" IS 'a table named select; with "quotes" and a ; semicolon';
COMMENT ON COLUMN "select"."événement" IS $$dollar-quoted: it's $$;

CREATE VIEW "view of ""select""" AS
    SELECT "from", "a""b""c", "日本語の列", "UPPER", upper FROM "select";

SELECT U&"d\0061t\+000061" FROM (SELECT 1 AS data) AS "sub query";

INSERT INTO "select" ("from", "a""b""c", "my column", "événement", "日本語の列", "user", "table", "UPPER", upper)
VALUES (1, 'x"y', 'spaces', 'é', '語', current_user, 0, 1, 2);

SELECT "from", "a""b""c" FROM "select" WHERE "user" = current_user AND "UPPER" <> upper;
SELECT id FROM "relay_yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy_";
