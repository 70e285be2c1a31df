-- The relay seed with 50 rows per partition (psql_file cannot pass -v variables).
\set rows_per_partition 50
\ir ../../../../../workloads/relay/seed.sql
