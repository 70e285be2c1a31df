//! Free disk before a run: the shadow is a full copy of the table, its TOAST and its
//! indexes, written while the source stays, and the copy and the index builds write
//! about as much WAL. Measured only when the server runs on this host (reached over a
//! Unix socket or loopback), the role may read `data_directory` (superuser or
//! `pg_read_all_settings`), and this process can `statvfs` the directories; otherwise
//! the run needs the room the operator gives (`--disk-room`) and is refused without it
//! (INV: OC-7). Either way the check says what the run watches while it writes
//! ([`crate::cas::disk_watch`]).
//!
//! Need, per file system: `Σ (size of what is copied there) × (1 + margin)`, plus
//! `min(Σ sizes, max_wal_size)` on the file system of `pg_wal`. Sizes: each relation's
//! heap and TOAST (table and indexes) in its tablespace — the target tablespace for a
//! `SET TABLESPACE` — and each index in its own. The margin is 25 %
//! (`PGSHIFT_DISK_MARGIN_PERCENT` overrides it, for tests).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tokio_postgres::Client;

use crate::cas::disk_watch::{free_space, size, DiskWatch};
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

/// What the check found, for the run's report and progress, and what the run watches
/// while it writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskCheck {
    /// The sentence for the report and progress (`free disk checked: …`, or `free disk
    /// not measured: …` with the room the operator gave).
    line: String,
    /// What the run watches while it copies and builds.
    pub watch: DiskWatch,
}

impl DiskCheck {
    /// The sentence for the report and progress.
    pub fn line(&self) -> String {
        self.line.clone()
    }
}

fn margin_percent() -> u64 {
    std::env::var("PGSHIFT_DISK_MARGIN_PERCENT")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(MARGIN_PERCENT)
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

/// What the run will write: the bytes copied per tablespace and in all, and the WAL.
struct Need {
    /// `(bytes, location)` per tablespace, the location empty for `pg_default`.
    pieces: Vec<(u64, String)>,
    /// Everything copied (heaps, TOAST, indexes).
    total: u64,
    /// WAL written: the copy's, up to `max_wal_size`.
    wal: u64,
    /// The margin on copied bytes, in percent.
    margin: u64,
}

impl Need {
    fn with_margin(&self, bytes: u64) -> u64 {
        bytes.saturating_mul(self.margin.saturating_add(100)) / 100
    }

    /// Everything, on one volume.
    fn all(&self) -> u64 {
        self.with_margin(self.total).saturating_add(self.wal)
    }

    /// What the run keeps free on a measured volume while it writes: the margin on
    /// what it copies (at least 16 MiB).
    fn reserve(&self) -> u64 {
        (self.total.saturating_mul(self.margin) / 100).max(MIN_RESERVE)
    }
}

/// The least a run keeps free on a measured volume while it writes.
const MIN_RESERVE: u64 = 16 << 20;

/// Measures what can be measured; refuses (`insufficient-disk-space`) when the run's
/// need does not fit on a file system it writes to, or the room `room` the operator
/// gave; refuses (`disk-space-not-measured`) when free space cannot be measured and no
/// room was given.
pub(super) async fn check(
    client: &Client,
    table_oid: u32,
    target: Option<&str>,
    room: Option<u64>,
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
    let sizes = client
        .query(SIZES, &[&table_oid, &target])
        .await
        .map_err(db("measuring the table"))?;
    let pieces: Vec<(u64, String)> = sizes
        .iter()
        .map(|row| {
            let (bytes, location): (i64, String) = (row.get(1), row.get(2));
            (u64::try_from(bytes).unwrap_or(0), location)
        })
        .collect();
    let total = pieces
        .iter()
        .fold(0u64, |sum, (bytes, _)| sum.saturating_add(*bytes));
    let max_wal = u64::try_from(max_wal_mb.unwrap_or(1024)).unwrap_or(1024) << 20;
    let need = Need {
        pieces,
        total,
        wal: total.min(max_wal),
        margin: margin_percent(),
    };
    if let Some(host) = address.as_deref().and_then(remote_host) {
        return unmeasured(
            format!("the server is reached over the network ({host}), not on this host"),
            &need,
            room,
        );
    }
    let Some(data_directory) = data_directory else {
        return unmeasured(
            format!(
                "role {role} may not read data_directory (it needs pg_read_all_settings, or superuser)"
            ),
            &need,
            room,
        );
    };
    match measured(&need, &PathBuf::from(data_directory), room)? {
        Ok(check) => Ok(check),
        Err(why) => unmeasured(why, &need, room),
    }
}

/// Free space could not be measured (`why`): the run goes on only within the room the
/// operator gave, and watches what it writes against it.
fn unmeasured(why: String, need: &Need, room: Option<u64>) -> Result<DiskCheck, CasError> {
    // INV: OC-7 — a run whose free disk cannot be measured needs the operator's room.
    let Some(room) = room else {
        return Err(CasError::Refused(Refusal::new(
            RefusalCause::DiskSpaceNotMeasured,
            format!(
                "free disk cannot be measured: {why}. The run needs about {} (the table, its TOAST and indexes, {} in all, \
                 plus {} %, and WAL up to max_wal_size, {}); give --disk-room SIZE, the room the database's volumes have for it, \
                 and the run stops itself before it writes more than that",
                size(need.all()),
                size(need.total),
                need.margin,
                size(need.wal)
            ),
        )));
    };
    if need.all() > room {
        return Err(CasError::Refused(Refusal::new(
            RefusalCause::InsufficientDiskSpace,
            format!(
                "the run needs about {} and --disk-room gives {}: the table, its TOAST and indexes ({} in all) plus {} %, \
                 and WAL up to max_wal_size ({}); free space (or lower the need: a smaller table, another tablespace)",
                size(need.all()),
                size(room),
                size(need.total),
                need.margin,
                size(need.wal)
            ),
        )));
    }
    Ok(DiskCheck {
        line: format!(
            "free disk not measured ({why}); the run needs about {} of the {} --disk-room gives, and stops itself past {}",
            size(need.all()),
            size(room),
            size(room.saturating_sub(need.wal))
        ),
        watch: DiskWatch {
            volumes: Vec::new(),
            written_limit: Some(room.saturating_sub(need.wal)),
        },
    })
}

/// Measures the free space of every volume the run writes to; `Ok(Err(why))` when one
/// cannot be measured from this process.
fn measured(
    need: &Need,
    data_directory: &Path,
    room: Option<u64>,
) -> Result<Result<DiskCheck, String>, CasError> {
    // Need and a description per file system (by device).
    let mut volumes: BTreeMap<u64, (u64, u64, PathBuf)> = BTreeMap::new();
    for (bytes, location) in &need.pieces {
        // An in-place tablespace's location is relative to the data directory
        // (`pg_tblspc/<oid>`); `join` keeps an absolute one as it is.
        let path = if location.is_empty() {
            data_directory.to_path_buf()
        } else {
            data_directory.join(location)
        };
        let (free, device) = match free_space(&path) {
            Ok(found) => found,
            Err(why) => return Ok(Err(why)),
        };
        let entry = volumes.entry(device).or_insert((0, free, path));
        entry.0 = entry.0.saturating_add(need.with_margin(*bytes));
    }
    let wal_dir = data_directory.join("pg_wal");
    let (wal_free, wal_device) = match free_space(&wal_dir) {
        Ok(found) => found,
        Err(why) => return Ok(Err(why)),
    };
    let entry = volumes
        .entry(wal_device)
        .or_insert((0, wal_free, wal_dir.clone()));
    entry.0 = entry.0.saturating_add(need.wal);
    let mut lines = Vec::new();
    for (needed, free, path) in volumes.values() {
        let free = room.map_or(*free, |room| room.min(*free));
        if *needed > free {
            return Err(CasError::Refused(Refusal::new(
                RefusalCause::InsufficientDiskSpace,
                format!(
                    "the run needs about {} on the file system of {} and {} is free: the table, its TOAST and indexes ({} in all) \
                     plus {} %, and WAL up to max_wal_size ({}); free space there (or lower the need: a smaller table, another tablespace)",
                    size(*needed),
                    path.display(),
                    size(free),
                    size(need.total),
                    need.margin,
                    size(need.wal)
                ),
            )));
        }
        lines.push(format!(
            "needs about {} of {} free on {}",
            size(*needed),
            size(free),
            path.display()
        ));
    }
    let reserve = need.reserve();
    Ok(Ok(DiskCheck {
        line: format!(
            "free disk checked: {}; the run stops itself if less than {} stays free on any of them",
            lines.join("; "),
            size(reserve)
        ),
        watch: DiskWatch {
            volumes: volumes
                .into_values()
                .map(|(_, _, path)| (path, reserve))
                .collect(),
            written_limit: room.map(|room| room.saturating_sub(need.wal)),
        },
    }))
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
