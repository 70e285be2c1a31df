//! Connecting to PostgreSQL.
