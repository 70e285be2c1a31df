//! Free disk, where it can be measured: the shadow is a full copy of the table, its
//! TOAST and its indexes, written while the source stays, and the copy and the index
//! builds write about as much WAL. Measured only when the server runs on this host
//! (reached over a Unix socket or loopback), the role may read `data_directory`
//! (superuser or `pg_read_all_settings`), and this process can `statvfs` the
//! directories; otherwise the run says why it was not checked.
//!
//! Need, per file system: `Σ (size of what is copied there) × (1 + margin)`, plus
//! `min(Σ sizes, max_wal_size)` on the file system of `pg_wal`. Sizes: each relation's
//! heap and TOAST (table and indexes) in its tablespace — the target tablespace for a
//! `SET TABLESPACE` — and each index in its own. The margin is 25 %
//! (`PGSHIFT_DISK_MARGIN_PERCENT` overrides it, for tests).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tokio_postgres::Client;

use crate::cas::error::CasError;
use crate::refusal::{Refusal, RefusalCause};

/// The default margin on the copied bytes, in percent.
const MARGIN_PERCENT: u64 = 25;

/// Bytes to copy per tablespace: `(tablespace, bytes, location)`, the location empty
/// for `pg_default`. `$1` the table, `$2` the tablespace a `SET TABLESPACE` moves the
/// heaps to (or NULL).
const SIZES: &str = "
WITH tree AS (
    SELECT $1::pg_catalog.oid AS oid
    UNION ALL SELECT i.inhrelid FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) $1),
db AS (SELECT d.dattablespace FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()),
pieces (spc, bytes) AS (
    SELECT coalesce((SELECT t.oid FROM pg_catalog.pg_tablespace t WHERE t.spcname OPERATOR(pg_catalog.=) $2::pg_catalog.text),
                    NULLIF(c.reltablespace, 0), (SELECT dattablespace FROM db)),
           pg_catalog.pg_relation_size(c.oid) OPERATOR(pg_catalog.+)
           coalesce(pg_catalog.pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0)
      FROM tree JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) tree.oid
    UNION ALL
    SELECT coalesce(NULLIF(ic.reltablespace, 0), (SELECT dattablespace FROM db)), pg_catalog.pg_relation_size(ic.oid)
      FROM tree JOIN pg_catalog.pg_index i ON i.indrelid OPERATOR(pg_catalog.=) tree.oid
      JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid)
SELECT t.spcname::pg_catalog.text, pg_catalog.sum(p.bytes)::pg_catalog.int8, pg_catalog.pg_tablespace_location(t.oid)
  FROM pieces p JOIN pg_catalog.pg_tablespace t ON t.oid OPERATOR(pg_catalog.=) p.spc
 GROUP BY t.oid, t.spcname ORDER BY 1";

/// What the check found, for the run's report and progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskCheck {
    /// Measured, and it fits: a line saying so.
    Checked(String),
    /// Not measured: why.
    NotChecked(String),
}

impl DiskCheck {
    /// The sentence for the report and progress (`free disk not checked: …` when it
    /// could not be measured).
    pub fn line(&self) -> String {
        match self {
            DiskCheck::Checked(line) => format!("free disk checked: {line}"),
            DiskCheck::NotChecked(why) => format!("free disk not checked: {why}"),
        }
    }
}

fn margin_percent() -> u64 {
    std::env::var("PGSHIFT_DISK_MARGIN_PERCENT")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(MARGIN_PERCENT)
}

/// Free bytes for an unprivileged user on the file system of `path`, and its device.
#[cfg(unix)]
fn free_space(path: &Path) -> Result<(u64, u64), String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let device = std::fs::metadata(path)
        .map_err(|e| format!("cannot examine {} from this process: {e}", path.display()))?
        .dev();
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} is not a usable path", path.display()))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is NUL-terminated and outlives the call; `stat` is only read
    // after `statvfs` reported that it filled it in.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(format!(
            "cannot statvfs {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `statvfs` returned 0, so it initialised `stat`.
    let stat = unsafe { stat.assume_init() };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let free = u64::from(stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64);
    Ok((free, device))
}

#[cfg(not(unix))]
fn free_space(_path: &Path) -> Result<(u64, u64), String> {
    Err("free space is measured on Unix hosts only".to_owned())
}

/// The server's address (`inet_server_addr()`, as `host/prefix`) when it is not a
/// loopback one; NULL (a Unix socket) never comes here.
fn remote_host(address: &str) -> Option<&str> {
    let host = address.split('/').next().unwrap_or_default();
    let loopback = host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback());
    (!loopback).then_some(host)
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Measures what can be measured; refuses (`insufficient-disk-space`) when the run's
/// need does not fit on a file system it writes to.
pub(super) async fn check(
    client: &Client,
    table_oid: u32,
    target: Option<&str>,
) -> Result<DiskCheck, CasError> {
    let db = |what: &'static str| move |e| CasError::db(what, e);
    let row = client
        .query_one(
            "SELECT pg_catalog.inet_server_addr()::pg_catalog.text, \
                    (SELECT s.setting FROM pg_catalog.pg_settings s WHERE s.name OPERATOR(pg_catalog.=) 'data_directory'), \
                    (SELECT s.setting::pg_catalog.int8 FROM pg_catalog.pg_settings s WHERE s.name OPERATOR(pg_catalog.=) 'max_wal_size'), \
                    CURRENT_USER::pg_catalog.text",
            &[],
        )
        .await
        .map_err(db("reading where the server keeps its data"))?;
    let (address, data_directory, max_wal_mb, role): (
        Option<String>,
        Option<String>,
        Option<i64>,
        String,
    ) = (row.get(0), row.get(1), row.get(2), row.get(3));
    if let Some(host) = address.as_deref().and_then(remote_host) {
        return Ok(DiskCheck::NotChecked(format!(
            "the server is reached over the network ({host}), not on this host"
        )));
    }
    let Some(data_directory) = data_directory else {
        return Ok(DiskCheck::NotChecked(format!(
            "role {role} may not read data_directory (it needs pg_read_all_settings, or superuser)"
        )));
    };
    let data_directory = PathBuf::from(data_directory);
    let sizes = client
        .query(SIZES, &[&table_oid, &target])
        .await
        .map_err(db("measuring the table"))?;
    let margin = margin_percent();
    // Need and a description per file system (by device).
    let mut need: BTreeMap<u64, (u64, u64, PathBuf)> = BTreeMap::new();
    let mut total: u64 = 0;
    for row in &sizes {
        let (bytes, location): (i64, String) = (row.get(1), row.get(2));
        let bytes = u64::try_from(bytes).unwrap_or(0);
        total = total.saturating_add(bytes);
        // An in-place tablespace's location is relative to the data directory
        // (`pg_tblspc/<oid>`); `join` keeps an absolute one as it is.
        let path = if location.is_empty() {
            data_directory.clone()
        } else {
            data_directory.join(location)
        };
        let (free, device) = match free_space(&path) {
            Ok(found) => found,
            Err(why) => return Ok(DiskCheck::NotChecked(why)),
        };
        let entry = need.entry(device).or_insert((0, free, path));
        entry.0 = entry
            .0
            .saturating_add(bytes.saturating_mul(margin.saturating_add(100)) / 100);
    }
    let wal_dir = data_directory.join("pg_wal");
    let (wal_free, wal_device) = match free_space(&wal_dir) {
        Ok(found) => found,
        Err(why) => return Ok(DiskCheck::NotChecked(why)),
    };
    let max_wal = u64::try_from(max_wal_mb.unwrap_or(1024)).unwrap_or(1024) << 20;
    let wal = total.min(max_wal);
    let entry = need
        .entry(wal_device)
        .or_insert((0, wal_free, wal_dir.clone()));
    entry.0 = entry.0.saturating_add(wal);
    let mut lines = Vec::new();
    for (needed, free, path) in need.values() {
        if needed > free {
            return Err(CasError::Refused(Refusal::new(
                RefusalCause::InsufficientDiskSpace,
                format!(
                    "the run needs about {} on the file system of {} and {} is free: the table, its TOAST and indexes ({} in all) \
                     plus {margin} %, and WAL up to max_wal_size ({}); free space there (or lower the need: a smaller table, another tablespace)",
                    gib(*needed),
                    path.display(),
                    gib(*free),
                    gib(total),
                    gib(wal)
                ),
            )));
        }
        lines.push(format!(
            "needs about {} of {} free on {}",
            gib(*needed),
            gib(*free),
            path.display()
        ));
    }
    Ok(DiskCheck::Checked(lines.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::remote_host;

    #[test]
    fn only_a_loopback_address_counts_as_this_host() {
        assert_eq!(remote_host("127.0.0.1/32"), None);
        assert_eq!(remote_host("127.0.0.2/32"), None);
        assert_eq!(remote_host("::1/128"), None);
        assert_eq!(remote_host("10.1.2.3/32"), Some("10.1.2.3"));
        assert_eq!(remote_host("fe80::1/64"), Some("fe80::1"));
        assert_eq!(remote_host("not an address"), Some("not an address"));
    }
}
