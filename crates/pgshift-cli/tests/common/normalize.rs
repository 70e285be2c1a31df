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
