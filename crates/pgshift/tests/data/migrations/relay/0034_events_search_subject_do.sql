-- 0034_events_search_subject_do.sql
--
-- Intent: long-form events get a subject (their title tag, filled by the ingest
-- path from now on), and full-text search covers it. search_tsv keeps the kinds and
-- the text configuration it has today, whatever earlier migrations made of them: the
-- block reads the current expression out of pg_attrdef and puts the subject in front
-- of the content.
--
-- Hazards: the DO block's EXECUTE drops and re-adds the STORED generated column:
-- a full rewrite of every partition under ACCESS EXCLUSIVE, held until the block
-- ends. Expect relay downtime (every writer and reader of events waits). The DDL is
-- built at run time, so no tool reading this file can see it. Dropping the column
-- drops events_search_tsv_idx; the CREATE INDEX after the block is a plain GIN
-- build on the partitioned parent (SHARE on every partition).

ALTER TABLE events ADD COLUMN IF NOT EXISTS subject text;

DO $$
DECLARE
    expr text;
BEGIN
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO expr
      FROM pg_attrdef d
      JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
     WHERE d.adrelid = 'events'::regclass
       AND a.attname = 'search_tsv'
       AND a.attgenerated = 's';
    IF expr IS NULL THEN
        RAISE EXCEPTION 'relay: events.search_tsv is not a stored generated column';
    END IF;
    IF strpos(expr, 'subject') > 0 THEN
        RETURN;  -- already covers the subject
    END IF;
    IF strpos(expr, 'content') = 0 THEN
        RAISE EXCEPTION 'relay: unexpected search_tsv expression: %', expr;
    END IF;
    expr := replace(expr, 'content', '(COALESCE(subject, '''') || '' '' || content)');
    EXECUTE format(
        'ALTER TABLE events DROP COLUMN search_tsv, '
        'ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (%s) STORED', expr);
END
$$;

CREATE INDEX IF NOT EXISTS events_search_tsv_idx ON events USING gin (search_tsv);
