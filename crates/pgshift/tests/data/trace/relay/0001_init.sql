-- Relay: accounts, the partitioned event log, subscriptions and deliveries.
CREATE TABLE accounts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    handle text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE events (
    id bigint NOT NULL,
    account_id bigint NOT NULL REFERENCES accounts (id),
    kind integer NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}',
    tag text GENERATED ALWAYS AS (payload ->> 'tag') STORED,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);

CREATE TABLE events_2026_01 PARTITION OF events
    FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE events_2026_02 PARTITION OF events
    FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');

CREATE TABLE subscriptions (
    id bigint PRIMARY KEY,
    account_id bigint NOT NULL,
    filter jsonb
);

CREATE TABLE deliveries (
    id bigint PRIMARY KEY,
    subscription_id bigint NOT NULL,
    delivered_at timestamptz
);

CREATE FUNCTION touch_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END $$;

-- Gives one table an updated_at column kept current by a trigger.
CREATE FUNCTION install_touch_trigger(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS updated_at timestamptz', tbl);
    EXECUTE format('CREATE TRIGGER touch_updated_at BEFORE UPDATE ON %s '
                   'FOR EACH ROW EXECUTE FUNCTION touch_updated_at()', tbl);
END $$;

-- Adds an audit timestamp to a table, stamped when the column is added.
CREATE FUNCTION ensure_audit_column(tbl text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %I ADD COLUMN IF NOT EXISTS audited_at timestamptz '
                   'DEFAULT clock_timestamp()', tbl);
END $$;
