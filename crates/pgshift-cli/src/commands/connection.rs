//! Which connection string a command uses: `--url` (or `PGSHIFT_URL`), else
//! `DATABASE_URL`, else none, so that the `PG*` variables and libpq's defaults
//! decide. In every case the `PG*` variables fill in what the string leaves out.

/// The environment variable many frameworks and hosts set to the database URL.
pub(crate) const DATABASE_URL_ENV: &str = "DATABASE_URL";

/// The connection string to parse, given the `--url` value.
pub(crate) fn connection_text(url: Option<&str>) -> String {
    match url {
        Some(url) => url.to_owned(),
        None => std::env::var(DATABASE_URL_ENV)
            .ok()
            .filter(|value| !value.trim().is_empty())
            .unwrap_or_default(),
    }
}
