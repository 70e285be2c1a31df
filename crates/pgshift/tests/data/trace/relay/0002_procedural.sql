-- Rebuild the generated tag column so it is always lower case.
-- Expect relay downtime: every partition of events is rewritten.
DO $$
DECLARE
    expr text;
BEGIN
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO expr
    FROM pg_attrdef d
    JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    WHERE d.adrelid = 'events'::regclass AND a.attname = 'tag';
    EXECUTE 'ALTER TABLE events DROP COLUMN tag';
    EXECUTE format('ALTER TABLE events ADD COLUMN tag text GENERATED ALWAYS AS (lower(%s)) STORED', expr);
END $$;

-- Refuse to go on if an old client wrote kind 0.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM events WHERE kind = 0) THEN
        RAISE EXCEPTION 'events of kind 0 must be migrated first';
    END IF;
END $$;

-- Widen account ids on fresh installs only (a live relay keeps bigint).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM subscriptions LIMIT 1) THEN
        ALTER TABLE subscriptions ALTER COLUMN account_id TYPE numeric(20);
    END IF;
END $$;

-- Every mutable table gets the updated_at trigger.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.oid::regclass AS tbl
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind = 'r'
          AND c.relname IN ('accounts', 'subscriptions', 'deliveries')
        ORDER BY c.relname
    LOOP
        PERFORM install_touch_trigger(r.tbl);
    END LOOP;
END $$;

-- Deliveries are looked up by subscription.
DO $$
BEGIN
    IF to_regclass('public.deliveries_subscription_idx') IS NULL THEN
        CREATE INDEX deliveries_subscription_idx ON deliveries (subscription_id);
    END IF;
    IF pg_get_indexdef('public.deliveries_subscription_idx'::regclass) NOT LIKE '%(subscription_id)' THEN
        RAISE EXCEPTION 'deliveries_subscription_idx has an unexpected definition';
    END IF;
END $$;

SELECT ensure_audit_column('accounts');
