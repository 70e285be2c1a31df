-- +goose Up
CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL, updated_at timestamptz);

-- +goose StatementBegin
CREATE FUNCTION ledgers_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION ledgers_touch();
DROP TABLE ledgers;
