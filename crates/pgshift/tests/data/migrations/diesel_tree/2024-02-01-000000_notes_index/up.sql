CREATE INDEX CONCURRENTLY notes_body_idx ON notes (body);
