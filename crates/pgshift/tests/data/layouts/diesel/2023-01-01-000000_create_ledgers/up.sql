CREATE TABLE ledgers (
    id bigint PRIMARY KEY,
    workspace text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
