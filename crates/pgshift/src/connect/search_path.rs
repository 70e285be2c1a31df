//! Parsing the text of a `search_path` setting into schema names.
//!
//! This follows PostgreSQL's `SplitIdentifierString`: entries are separated by
//! commas, surrounded by optional whitespace; a double-quoted entry keeps its case
//! and turns `""` into `"`; an unquoted entry is folded to lower case (ASCII, as the
//! server does in UTF-8 databases). The special entry `"$user"` is returned as
//! `$user`, as PostgreSQL itself interprets it after unquoting.

/// The schema names of a `search_path` value, or `None` when the text is not a
/// valid identifier list.
pub(crate) fn parse(text: &str) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut chars = text.chars().peekable();
    skip_space(&mut chars);
    if chars.peek().is_none() {
        return Some(names);
    }
    loop {
        let name = match chars.peek() {
            Some('"') => quoted(&mut chars)?,
            Some(_) => unquoted(&mut chars),
            None => return None,
        };
        if name.is_empty() {
            return None;
        }
        names.push(name);
        skip_space(&mut chars);
        match chars.next() {
            None => return Some(names),
            Some(',') => skip_space(&mut chars),
            Some(_) => return None,
        }
    }
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

fn quoted(chars: &mut Chars<'_>) -> Option<String> {
    chars.next();
    let mut name = String::new();
    loop {
        match chars.next()? {
            '"' if chars.peek() == Some(&'"') => {
                chars.next();
                name.push('"');
            }
            '"' => return Some(name),
            c => name.push(c),
        }
    }
}

fn unquoted(chars: &mut Chars<'_>) -> String {
    let mut name = String::new();
    while let Some(&c) = chars.peek() {
        if c == ',' || c.is_whitespace() {
            break;
        }
        name.push(c.to_ascii_lowercase());
        chars.next();
    }
    name
}

fn skip_space(chars: &mut Chars<'_>) {
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        parse(text).expect("valid search_path")
    }

    #[test]
    fn default_search_path_keeps_dollar_user() {
        assert_eq!(names("\"$user\", public"), vec!["$user", "public"]);
    }

    #[test]
    fn quoted_names_keep_case_commas_and_quotes() {
        assert_eq!(
            names(r#""My Schema","a,b", "say ""hi""""#),
            vec!["My Schema", "a,b", r#"say "hi""#]
        );
    }

    #[test]
    fn unquoted_names_fold_to_lower_case_and_spaces_are_trimmed() {
        assert_eq!(names("  App ,\tAudit  ,x"), vec!["app", "audit", "x"]);
    }

    #[test]
    fn empty_setting_is_an_empty_list() {
        assert!(names("").is_empty());
        assert!(names("   ").is_empty());
    }

    #[test]
    fn malformed_lists_are_rejected() {
        for text in ["a,", ",a", "a b", "\"open", "a,,b", "\"\""] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
