-- 0004_events_add_content_size_check.sql
--
-- Intent: enforce the relay's 64 KiB content limit in the database too.
--
-- Hazard: ADD CONSTRAINT ... CHECK without NOT VALID. The constraint is validated by
-- scanning every partition while ACCESS EXCLUSIVE is held on the parent and on each
-- partition: no reads, no writes until the scan of the whole table ends. The online
-- path is ADD ... NOT VALID, then VALIDATE CONSTRAINT (SHARE UPDATE EXCLUSIVE).

ALTER TABLE events
    ADD CONSTRAINT events_content_size_check
    CHECK (octet_length(content) <= 65536);
