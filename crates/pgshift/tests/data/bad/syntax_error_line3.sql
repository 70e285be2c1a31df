-- syntax_error_line3.sql: expected error: syntax error at or near "TABEL", line 3, column 8 (1-based; 0-based byte offset 161 from file start)
SELECT 1;
CREATE TABEL broken (id int);
SELECT 2;
