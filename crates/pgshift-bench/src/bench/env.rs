//! What the benchmark ran on: the machine, the server, the time, the command.

use std::time::SystemTime;

use pgshift_embedded::Cluster;
use tokio_postgres::Client;

use super::results::{Machine, PostgresInfo};
use super::{BenchResult, Context};

/// Settings reported with the results.
const REPORTED_SETTINGS: [&str; 8] = [
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_level",
    "shared_buffers",
    "maintenance_work_mem",
    "max_wal_size",
    "checkpoint_timeout",
];

/// The server's version and the settings that matter to the figures.
pub async fn postgres_info(client: &Client, cluster: &Cluster) -> BenchResult<PostgresInfo> {
    let version: String = client
        .query_one("SHOW server_version", &[])
        .await
        .ctx("reading server_version")?
        .get(0);
    let version_string: String = client
        .query_one("SELECT version()", &[])
        .await
        .ctx("reading version()")?
        .get(0);
    let mut settings = Vec::new();
    for name in REPORTED_SETTINGS {
        let value: String = client
            .query_one(&format!("SHOW {name}"), &[])
            .await
            .ctx("reading a setting")?
            .get(0);
        settings.push((name.to_owned(), value));
    }
    Ok(PostgresInfo {
        version: version.split_whitespace().next().unwrap_or("").to_owned(),
        version_string,
        bindir: cluster.bindir().display().to_string(),
        settings,
    })
}

/// The machine, from `/proc` and `/etc/os-release` (empty fields where a file
/// is missing).
pub fn machine() -> Machine {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let meminfo = read("/proc/meminfo");
    let os_release = read("/etc/os-release");
    Machine {
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model: field(&cpuinfo, "model name", ':').unwrap_or_default(),
        memory_mib: field(&meminfo, "MemTotal", ':')
            .and_then(|v| {
                v.split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .map_or(0, |kib| kib / 1024),
        os: field(&os_release, "PRETTY_NAME", '=')
            .map(|v| v.trim_matches('"').to_owned())
            .unwrap_or_default(),
        kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
        load_average_start: load_average(),
        load_average_end: String::new(),
    }
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value of the first `name<sep>value` line of `text`, trimmed.
fn field(text: &str, name: &str, separator: char) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(separator)?;
        (key.trim() == name).then(|| value.trim().to_owned())
    })
}

/// `VmHWM` (peak resident set) of process `pid` (`"self"` for this one), KiB.
pub fn vm_hwm_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_hwm(&status)
}

/// `VmHWM` from the text of a `/proc/<pid>/status` file, KiB.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    field(status, "VmHWM", ':')?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `time` as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_iso8601(time: SystemTime) -> String {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// The commit of the workspace the benchmark was built from, with
/// `+ uncommitted changes` when the engine's or the benchmark's sources
/// differ from it (`unknown` without git).
pub fn source_revision() -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".to_owned();
    };
    let dirty = git(&[
        "status",
        "--porcelain",
        "--",
        "crates/pgshift",
        "crates/pgshift-sql",
        "crates/pgshift-bench",
        "crates/pgshift-embedded",
        "workloads",
    ])
    .is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{commit} + uncommitted changes")
    } else {
        commit
    }
}

/// The command line that runs the benchmark with `args`, from the workspace.
pub fn command_line(args: &[String]) -> String {
    let mut out = "cargo run --release -p pgshift-bench --bin pgshift-bench --".to_owned();
    for arg in args {
        out.push(' ');
        out.push_str(&shell_quote(arg));
    }
    out
}

/// `arg`, quoted for a POSIX shell when it needs to be.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn utc_dates() {
        let at = |s: u64| utc_iso8601(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_798_761_599), "2026-12-31T23:59:59Z");
    }

    #[test]
    fn status_and_info_fields() {
        let status =
            "Name:\tpgshift-bench\nVmPeak:\t  123456 kB\nVmHWM:\t   20480 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(20480));
        assert_eq!(parse_vm_hwm("Name: zombie\n"), None);
        assert_eq!(
            field("model name\t: Some CPU @ 2GHz\n", "model name", ':').as_deref(),
            Some("Some CPU @ 2GHz")
        );
        assert!(vm_hwm_kib("self").is_some_and(|k| k > 0));
    }

    #[test]
    fn command_lines_are_quoted() {
        let args = [
            "--out".to_owned(),
            "docs/bench".to_owned(),
            "a b".to_owned(),
        ];
        assert_eq!(
            command_line(&args),
            "cargo run --release -p pgshift-bench --bin pgshift-bench -- --out docs/bench 'a b'"
        );
    }
}
