-- unterminated_dollar.sql: the dollar-quoted body opened on line 3 is never closed.
SELECT 1;
DO $$
BEGIN
    RAISE NOTICE 'this block never ends';
END;
