-- 0033_relay_side_tables_and_ddl_helpers.sql
--
-- Intent: the operator console's tables (moderation, invites, media, push, quotas),
-- each with an updated_at column, and three helpers the next migrations use:
-- relay_touch_updated_at() (a trigger function), relay_install_touch_trigger(regclass)
-- and relay_add_updated_at(regclass), both of which run DDL through EXECUTE.
--
-- Low risk: new, empty tables (ACCESS EXCLUSIVE only on themselves) and new
-- functions (no lock on any existing table). The risk is deferred: whoever calls
-- the two helpers runs DDL that no migration file shows.

CREATE TABLE relay_moderators (
    community_id uuid NOT NULL REFERENCES communities (id),
    pubkey bytea NOT NULL,
    role text NOT NULL DEFAULT 'moderator',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, pubkey)
);
CREATE TABLE relay_banned_pubkeys (
    community_id uuid NOT NULL REFERENCES communities (id),
    pubkey bytea NOT NULL,
    reason text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, pubkey)
);
CREATE TABLE relay_blocked_words (
    community_id uuid NOT NULL REFERENCES communities (id),
    word text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, word)
);
CREATE TABLE relay_reports (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    community_id uuid NOT NULL REFERENCES communities (id),
    event_id bytea NOT NULL,
    reporter bytea NOT NULL,
    reason text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_invites (
    code text PRIMARY KEY,
    community_id uuid NOT NULL REFERENCES communities (id),
    uses_left int NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_channel_members (
    community_id uuid NOT NULL,
    channel_id uuid NOT NULL,
    pubkey bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, channel_id, pubkey),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id)
);
CREATE TABLE relay_channel_pins (
    community_id uuid NOT NULL,
    channel_id uuid NOT NULL,
    event_id bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, channel_id, event_id),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id)
);
CREATE TABLE relay_read_markers (
    community_id uuid NOT NULL,
    channel_id uuid NOT NULL,
    pubkey bytea NOT NULL,
    last_read_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, channel_id, pubkey)
);
CREATE TABLE relay_nip05_names (
    community_id uuid NOT NULL REFERENCES communities (id),
    name text NOT NULL,
    pubkey bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, name)
);
CREATE TABLE relay_media_uploads (
    sha256 bytea PRIMARY KEY,
    community_id uuid NOT NULL REFERENCES communities (id),
    uploader bytea NOT NULL,
    bytes bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_push_subscriptions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    community_id uuid NOT NULL REFERENCES communities (id),
    pubkey bytea NOT NULL,
    endpoint text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_push_deliveries (
    subscription_id uuid NOT NULL REFERENCES relay_push_subscriptions (id),
    event_id bytea NOT NULL,
    status text NOT NULL DEFAULT 'queued',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subscription_id, event_id)
);
CREATE TABLE relay_webhooks (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    community_id uuid NOT NULL REFERENCES communities (id),
    url text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_api_tokens (
    token_hash bytea PRIMARY KEY,
    community_id uuid NOT NULL REFERENCES communities (id),
    scopes text[] NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_rate_limits (
    community_id uuid NOT NULL REFERENCES communities (id),
    kind int NOT NULL,
    per_minute int NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, kind)
);
CREATE TABLE relay_quotas (
    community_id uuid PRIMARY KEY REFERENCES communities (id),
    max_events bigint,
    max_bytes bigint,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_feature_flags (
    name text PRIMARY KEY,
    enabled boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_admin_notes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    community_id uuid NOT NULL REFERENCES communities (id),
    note text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_export_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    community_id uuid NOT NULL REFERENCES communities (id),
    state text NOT NULL DEFAULT 'pending',
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE relay_retention_policies (
    community_id uuid NOT NULL REFERENCES communities (id),
    kind int NOT NULL,
    keep interval NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, kind)
);

CREATE FUNCTION relay_touch_updated_at() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

-- Installs the updated_at trigger on one table (CREATE TRIGGER through EXECUTE).
CREATE FUNCTION relay_install_touch_trigger(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format(
        'CREATE TRIGGER relay_touch_updated_at BEFORE UPDATE ON %s '
        'FOR EACH ROW EXECUTE FUNCTION relay_touch_updated_at()', tbl);
END
$$;

-- Gives one table an updated_at column (ALTER TABLE through EXECUTE).
CREATE FUNCTION relay_add_updated_at(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format(
        'ALTER TABLE %s ADD COLUMN IF NOT EXISTS updated_at timestamptz '
        'NOT NULL DEFAULT now()', tbl);
END
$$;
