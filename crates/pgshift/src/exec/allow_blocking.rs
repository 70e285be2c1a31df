//! `--allow-blocking TABLE` accepts the blocking form of a rewrite on a table. A name
//! that no statement touches accepts nothing — most often a typo, after which the
//! operator believes a blocking form was accepted where it was not (or the other way
//! round) — so callers refuse the command line before anything runs.

use crate::script::Script;
use pgshift_sql::QualifiedName;

/// The names in `allowed` that no statement of `scripts` locks or creates.
pub fn untouched<'a, 's>(
    allowed: &'a [QualifiedName],
    scripts: impl IntoIterator<Item = &'s Script>,
) -> Vec<&'a QualifiedName> {
    let mut touched: Vec<&QualifiedName> = Vec::new();
    for script in scripts {
        for item in &script.statements {
            let c = &item.classification;
            touched.extend(c.locks.iter().map(|lock| &lock.relation));
            touched.extend(c.created_relations());
        }
    }
    allowed
        .iter()
        .filter(|name| !touched.iter().any(|t| name.matches(t)))
        .collect()
}

/// A table name as the command line takes it back (`--allow-blocking NAME`, `resume
/// NAME`): each part bare when it is a plain lower-case identifier, double-quoted
/// otherwise.
pub fn command_line_name(name: &QualifiedName) -> String {
    let part = |text: &str| {
        let plain = text
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_' || !c.is_ascii())
            && text.chars().all(|c| {
                c.is_ascii_lowercase()
                    || c.is_ascii_digit()
                    || c == '_'
                    || c == '$'
                    || !c.is_ascii()
            });
        if plain {
            text.to_owned()
        } else {
            format!("\"{}\"", text.replace('"', "\"\""))
        }
    };
    match &name.schema {
        Some(schema) => format!("{}.{}", part(schema), part(&name.name)),
        None => part(&name.name),
    }
}

#[cfg(test)]
mod tests {
    use super::command_line_name;
    use pgshift_sql::QualifiedName;

    #[test]
    fn names_are_quoted_only_where_the_command_line_needs_it() {
        assert_eq!(command_line_name(&QualifiedName::bare("items")), "items");
        assert_eq!(
            command_line_name(&QualifiedName::qualified("app", "Big \"T\"")),
            "app.\"Big \"\"T\"\"\""
        );
        assert_eq!(command_line_name(&QualifiedName::bare("a.b")), "\"a.b\"");
    }
}
