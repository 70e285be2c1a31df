CREATE TABLE orders (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id bigint NOT NULL REFERENCES accounts (id),
    total_cents bigint NOT NULL CHECK (total_cents >= 0),
    placed_at timestamptz NOT NULL DEFAULT now()
);
