//! pgshift
