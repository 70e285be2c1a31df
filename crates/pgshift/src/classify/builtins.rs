//! The names of PostgreSQL's built-in functions and types: every `proname` and
//! `typname` in `pg_catalog` of PostgreSQL 14 to 18, one per line, sorted
//! bytewise. A call of an unqualified name on this list is taken to be the built-in
//! one (whose locks are its statement's), and a cast to a type on it names no
//! relation's row type. The lock truth test checks the lists against the server it
//! runs on and, with `PGSHIFT_UPDATE_BUILTINS=1`, adds what that server has.

use std::sync::OnceLock;

/// `pg_catalog`'s function names.
pub const FUNCTIONS: &str = include_str!("builtins/functions.txt");
/// `pg_catalog`'s type names.
pub const TYPES: &str = include_str!("builtins/types.txt");

fn sorted(
    list: &'static str,
    cell: &'static OnceLock<Vec<&'static str>>,
) -> &'static [&'static str] {
    cell.get_or_init(|| list.lines().filter(|l| !l.is_empty()).collect())
}

/// Whether `name` is the name of a function in `pg_catalog`.
pub fn is_function(name: &str) -> bool {
    static CELL: OnceLock<Vec<&'static str>> = OnceLock::new();
    sorted(FUNCTIONS, &CELL).binary_search(&name).is_ok()
}

/// Whether `name` is the name of a type in `pg_catalog`.
pub fn is_type(name: &str) -> bool {
    static CELL: OnceLock<Vec<&'static str>> = OnceLock::new();
    sorted(TYPES, &CELL).binary_search(&name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_bytewise_and_answer() {
        for list in [FUNCTIONS, TYPES] {
            let lines: Vec<&str> = list.lines().collect();
            assert!(lines.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
        }
        assert!(is_function("count") && is_function("lower") && is_function("nextval"));
        assert!(!is_function("item_count"));
        assert!(is_type("int4") && is_type("text") && is_type("pg_class"));
        assert!(!is_type("pair"));
    }
}
