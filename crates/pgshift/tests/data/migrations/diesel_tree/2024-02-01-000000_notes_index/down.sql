DROP INDEX notes_body_idx;
