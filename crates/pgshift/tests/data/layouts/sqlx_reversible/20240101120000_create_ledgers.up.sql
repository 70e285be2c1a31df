-- Ledgers of a small bookkeeping service, one per workspace.
CREATE TABLE ledgers (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace text NOT NULL,
    opened_on date NOT NULL DEFAULT current_date
);
