//! The names a statement refers to, wherever they appear in its syntax tree.
//!
//! A schema dump qualifies every name it writes (`pg_dump` runs with an empty
//! `search_path`), so a relation, type, function or sequence another file defines is
//! found by its schema-qualified name: in a `RangeVar`, in a dotted name list (a type,
//! a function, a trigger's function, a column's table), or in a string constant cast
//! to `regclass` (`nextval('app.s'::regclass)`). The walk is over the whole tree (its
//! serialized form), so no expression a DDL statement stores is missed; a pair of
//! strings that happens to spell a name another file defines only adds an ordering
//! constraint, which the materialization check then confirms.

use std::collections::BTreeSet;

use pgshift_sql::Statement;
use serde_json::Value;

use super::objects::Name;

/// Every schema-qualified name `statement` may refer to.
pub fn referenced(statement: &Statement) -> BTreeSet<Name> {
    let mut found = BTreeSet::new();
    if let Ok(tree) = serde_json::to_value(&statement.node) {
        walk(&tree, &mut found);
    }
    found
}

fn walk(value: &Value, found: &mut BTreeSet<Name>) {
    match value {
        Value::Object(map) => {
            // A `RangeVar`, inside a node or as a statement's own field.
            if let (Some(Value::String(schema)), Some(Value::String(name))) =
                (map.get("schemaname"), map.get("relname"))
            {
                if !schema.is_empty() {
                    found.insert((schema.clone(), name.clone()));
                }
            }
            if let Some(Value::Object(constant)) = map.get("AConst") {
                if let Some(text) = constant
                    .get("val")
                    .and_then(|v| v.get("Sval"))
                    .and_then(|s| s.get("sval"))
                    .and_then(Value::as_str)
                {
                    if let Some(name) = dotted_name(text) {
                        found.insert(name);
                    }
                }
            }
            for inner in map.values() {
                walk(inner, found);
            }
        }
        Value::Array(items) => {
            let parts: Vec<&str> = items.iter().filter_map(string_node).collect();
            if parts.len() == items.len() {
                for pair in parts.windows(2) {
                    found.insert((pair[0].to_owned(), pair[1].to_owned()));
                }
            }
            for inner in items {
                walk(inner, found);
            }
        }
        _ => {}
    }
}

/// The text of a `String` node (`{"node": {"String": {"sval": …}}}`).
fn string_node(value: &Value) -> Option<&str> {
    value.get("node")?.get("String")?.get("sval")?.as_str()
}

/// `schema.name` as `regclass` input reads it: two identifiers, each bare (folded to
/// lower case) or double-quoted (`""` for a quote).
pub fn dotted_name(text: &str) -> Option<Name> {
    let mut parts = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    '"' => break,
                    c => part.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                if !(c.is_alphanumeric() || c == '_' || c == '$') {
                    return None;
                }
                part.extend(c.to_lowercase());
                chars.next();
            }
        }
        if part.is_empty() {
            return None;
        }
        parts.push(part);
        match chars.next() {
            None => break,
            Some('.') => continue,
            Some(_) => return None,
        }
    }
    match <[String; 2]>::try_from(parts) {
        Ok([schema, name]) => Some((schema, name)),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sql: &str) -> BTreeSet<Name> {
        let statements = pgshift_sql::parse(sql).expect("parses");
        referenced(&statements[0])
    }

    fn has(found: &BTreeSet<Name>, schema: &str, name: &str) -> bool {
        found.contains(&(schema.to_owned(), name.to_owned()))
    }

    #[test]
    fn names_in_ddl_expressions_types_and_regclass_constants_are_found() {
        let found = names(
            "CREATE TABLE app.c (id integer DEFAULT nextval('app.free_seq'::regclass), \
             m app.mood, n integer CHECK (app.ok(n)))",
        );
        assert!(has(&found, "app", "c"));
        assert!(has(&found, "app", "free_seq"), "{found:?}");
        assert!(has(&found, "app", "mood"), "{found:?}");
        assert!(has(&found, "app", "ok"), "{found:?}");
        let trigger = names(
            "CREATE TRIGGER t BEFORE UPDATE ON app.c FOR EACH ROW EXECUTE FUNCTION app.touch()",
        );
        assert!(has(&trigger, "app", "touch"), "{trigger:?}");
        let fk =
            names("ALTER TABLE ONLY app.a ADD CONSTRAINT fk FOREIGN KEY (b) REFERENCES app.b(id)");
        assert!(has(&fk, "app", "b"), "{fk:?}");
    }

    #[test]
    fn regclass_text_is_read_as_the_server_reads_it() {
        assert_eq!(dotted_name("app.s"), Some(("app".into(), "s".into())));
        assert_eq!(dotted_name("App.S"), Some(("app".into(), "s".into())));
        assert_eq!(
            dotted_name(r#""My App"."a""b""#),
            Some(("My App".into(), "a\"b".into()))
        );
        assert_eq!(dotted_name("s"), None);
        assert_eq!(dotted_name("a b"), None);
        assert_eq!(dotted_name("a.b.c"), None);
        assert_eq!(dotted_name(r#""open"#), None);
    }
}
