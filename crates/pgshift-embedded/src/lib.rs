//! Throwaway local PostgreSQL clusters.
