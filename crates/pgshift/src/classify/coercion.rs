//! Type changes PostgreSQL makes without rewriting the table.
//!
//! `ALTER COLUMN … TYPE` rewrites the table and rebuilds its indexes unless the old
//! type converts to the new one without any function (binary-coercible) and no value
//! can change. PostgreSQL decides this per column in `ATColumnChangeRequiresRewrite`;
//! the cases it skips, which this module lists explicitly, are:
//!
//! | from | to | condition |
//! |---|---|---|
//! | `varchar(n)` | `varchar(m)` | `m >= n`, or no limit |
//! | `varchar(n)`, `varchar` | `text` | always |
//! | `text` | `varchar` | no limit |
//! | `numeric(p, s)` | `numeric(q, s)` | `q >= p`, same scale; or no limit |
//! | `varbit(n)` | `varbit(m)` | `m >= n`, or no limit |
//! | `timestamp(p)`, `timestamptz(p)`, `time(p)`, `timetz(p)` | same type `(q)` | `q >= p`, or no limit |
//! | `interval(…)` | `interval` | no limit |
//! | `cidr` | `inet` | always |
//! | any type | the same type and modifier | always (a no-op) |
//!
//! Everything else is treated as a rewrite — including `timestamp` → `timestamptz`,
//! which PostgreSQL 12+ skips only when the session time zone is UTC, and any change
//! with a `USING` clause or a `COLLATE` clause.

/// The typmod PostgreSQL stores for a type name and its written modifiers, or `None`
/// when the modifiers are not understood here.
pub(crate) fn typmod_for(type_name: &str, modifiers: &[i64]) -> Option<i32> {
    const VARHDRSZ: i64 = 4;
    let typmod = match (type_name, modifiers) {
        (_, []) => -1,
        ("varchar" | "bpchar", [n]) => n + VARHDRSZ,
        ("numeric", [precision]) => (precision << 16) + VARHDRSZ,
        ("numeric", [precision, scale]) => ((precision << 16) | (scale & 0xffff)) + VARHDRSZ,
        ("varbit" | "bit", [n]) => *n,
        ("timestamp" | "timestamptz" | "time" | "timetz", [precision]) => *precision,
        _ => return None,
    };
    i32::try_from(typmod).ok()
}

/// Whether changing a column of type `old` (typmod `old_typmod`) to `new`
/// (`new_typmod`) keeps every stored value as is, so no rewrite happens. Type names are
/// PostgreSQL's internal names (`varchar`, `int4`, `timestamptz`).
pub fn is_binary_coercible(old: &str, old_typmod: i32, new: &str, new_typmod: i32) -> bool {
    if old == new && old_typmod == new_typmod {
        return true;
    }
    let widens = |old_limit: i32, new_limit: i32| {
        new_limit == -1 || (old_limit != -1 && new_limit >= old_limit)
    };
    match (old, new) {
        ("varchar", "varchar") | ("varbit", "varbit") => widens(old_typmod, new_typmod),
        ("varchar", "text") => true,
        ("text", "varchar") => new_typmod == -1,
        ("numeric", "numeric") => numeric_widens(old_typmod, new_typmod),
        ("timestamp", "timestamp")
        | ("timestamptz", "timestamptz")
        | ("time", "time")
        | ("timetz", "timetz") => widens(old_typmod, new_typmod),
        ("interval", "interval") => new_typmod == -1,
        ("cidr", "inet") => new_typmod == -1,
        _ => false,
    }
}

fn numeric_widens(old_typmod: i32, new_typmod: i32) -> bool {
    if new_typmod == -1 {
        return true;
    }
    if old_typmod == -1 {
        return false;
    }
    let (old_precision, old_scale) = ((old_typmod - 4) >> 16, (old_typmod - 4) & 0xffff);
    let (new_precision, new_scale) = ((new_typmod - 4) >> 16, (new_typmod - 4) & 0xffff);
    new_scale == old_scale && new_precision >= old_precision
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coercible(old: (&str, &[i64]), new: (&str, &[i64])) -> bool {
        let old_typmod = typmod_for(old.0, old.1).expect("known typmod");
        let new_typmod = typmod_for(new.0, new.1).expect("known typmod");
        is_binary_coercible(old.0, old_typmod, new.0, new_typmod)
    }

    #[test]
    fn varchar_widening_is_free_and_narrowing_is_not() {
        assert!(coercible(("varchar", &[100]), ("varchar", &[200])));
        assert!(coercible(("varchar", &[100]), ("varchar", &[])));
        assert!(!coercible(("varchar", &[200]), ("varchar", &[100])));
        assert!(!coercible(("varchar", &[]), ("varchar", &[100])));
        assert!(coercible(("varchar", &[100]), ("text", &[])));
        assert!(coercible(("text", &[]), ("varchar", &[])));
        assert!(!coercible(("text", &[]), ("varchar", &[10])));
    }

    #[test]
    fn numeric_keeps_scale() {
        assert!(coercible(("numeric", &[10, 2]), ("numeric", &[12, 2])));
        assert!(!coercible(("numeric", &[10, 2]), ("numeric", &[12, 3])));
        assert!(!coercible(("numeric", &[10, 2]), ("numeric", &[8, 2])));
        assert!(coercible(("numeric", &[10, 2]), ("numeric", &[])));
        assert!(!coercible(("numeric", &[]), ("numeric", &[10, 2])));
    }

    #[test]
    fn integer_widening_rewrites() {
        assert!(!coercible(("int4", &[]), ("int8", &[])));
        assert!(!coercible(("timestamp", &[]), ("timestamptz", &[])));
        assert!(!coercible(("bpchar", &[10]), ("bpchar", &[20])));
        assert!(coercible(("int4", &[]), ("int4", &[])));
        assert!(coercible(("cidr", &[]), ("inet", &[])));
        assert!(coercible(("timestamptz", &[3]), ("timestamptz", &[6])));
    }
}
