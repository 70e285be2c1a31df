//! What `lint --trace` output holds that changes from run to run or machine to
//! machine, replaced by placeholders so that it can be snapshotted.

use serde_json::Value;

/// `pg_toast_16438_index` → `pg_toast_<oid>_index`.
pub fn without_oids(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("pg_toast_") {
        let (head, tail) = rest.split_at(at + "pg_toast_".len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("<oid>");
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// A `lint --trace --format json` document with the server version, the target's
/// version and `pg_dump` path, TOAST OIDs and the nested statement texts (recorded
/// differently by PostgreSQL 16+) replaced.
pub fn normalize(value: &mut Value) {
    match value {
        Value::String(text) => *text = without_oids(text),
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match key.as_str() {
                    "server_version" | "target_version_num" => {
                        *item = Value::String("<version>".to_owned());
                    }
                    "pg_dump" => *item = Value::String("<pg_dump>".to_owned()),
                    "nested" if item.is_array() => *item = Value::String("<recorded>".to_owned()),
                    _ => normalize(item),
                }
            }
        }
        _ => {}
    }
}

/// The `trace: PostgreSQL <version>, …` heading of `lint --trace`'s text output and
/// the version in it.
pub fn trace_heading(stdout: &str) -> (&str, &str) {
    let heading = stdout
        .lines()
        .find(|line| line.starts_with("trace: PostgreSQL "))
        .unwrap_or_else(|| panic!("the trace heading:\n{stdout}"));
    let version = heading
        .trim_start_matches("trace: PostgreSQL ")
        .split(',')
        .next()
        .unwrap_or_default();
    (heading, version)
}

/// Removes what PostgreSQL minor releases disagree on in a trace: the ACCESS SHARE
/// lock on an existing index, which some take and some do not for the same statement
/// (15.20 takes it on the referenced key's index while adding a foreign key, 15.18 does
/// not; 16+ take it on partitioned indexes where 14 and 15 do not; 15+ also hold ACCESS
/// SHARE on a foreign key's referenced table, 14 only its SHARE ROW EXCLUSIVE). So
/// ACCESS SHARE is also dropped from the modes of a relation held in a stronger one. In JSON the entries go; in text the count of index, TOAST and sequence locks
/// becomes `<n>`. The stronger locks, which are what lint states, stay in the snapshot.
pub fn without_weak_index_locks(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(without_weak_index_locks),
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if key == "locks" {
                    if let Value::Array(locks) = item {
                        for lock in locks.iter_mut() {
                            if lock["mode"] != "access-share" {
                                if let Value::Array(modes) = &mut lock["modes"] {
                                    modes.retain(|mode| mode != "access-share");
                                }
                            }
                        }
                        locks.retain(|lock| {
                            let index =
                                lock["kind"] == "index" || lock["kind"] == "partitioned-index";
                            !(index && lock["mode"] == "access-share" && lock["created"] == false)
                        });
                    }
                }
                without_weak_index_locks(item);
            }
        }
        _ => {}
    }
}

/// The text form of [`without_weak_index_locks`].
pub fn without_weak_index_lock_count(text: &str) -> String {
    const TAIL: &str = " on indexes, TOAST tables or sequences";
    text.lines()
        .map(|line| {
            let Some(at) = line.find(TAIL) else {
                return line.to_owned();
            };
            let head = &line[..at];
            let counted = head
                .rfind(", ")
                .or_else(|| head.rfind(": "))
                .map_or(0, |i| i + 2);
            format!("{}<n> locks{}", &head[..counted], &line[at..])
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}
