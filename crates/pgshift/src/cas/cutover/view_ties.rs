//! What is attached to a dependent view besides its definition, options, owner,
//! grants and comment: its triggers (`INSTEAD OF` and statement triggers), its rules
//! other than `_RETURN`, and per column a default, a comment and grants. Read under
//! the swap's lock as the server prints them (with `search_path` pinned to
//! `pg_catalog, pg_temp`, so every name in them is qualified), and made again
//! identically inside the swap's transaction (INV: CO-15).
//!
//! When the view is replaced in place (`CREATE OR REPLACE VIEW`) its triggers and
//! column settings stay, but a rule's actions name relations by OID and would keep
//! writing the old table: each rule is dropped and made again from its printed
//! definition, which names the table and so resolves to the new one. When the view is
//! dropped and made again, everything listed here is made again.

use serde::Deserialize;

use super::CasError;
use pgshift_sql::{quote_ident, quote_literal, QualifiedName};

/// The ties of one view, as [`TIES_SQL`] prints them.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Ties {
    triggers: Vec<Printed>,
    rules: Vec<Printed>,
    columns: Vec<Column>,
}

/// A trigger or a rule: its name, the server's definition of it, its comment.
#[derive(Debug, Deserialize)]
struct Printed {
    name: String,
    definition: String,
    comment: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Column {
    name: String,
    default: Option<String>,
    comment: Option<String>,
    grants: Vec<Grant>,
}

#[derive(Debug, Deserialize)]
struct Grant {
    grantee: String,
    privilege: String,
    grantable: bool,
}

/// One column of the dependent-views query: the ties of the view `v` as JSON text.
/// (`text`, so that the query's `DISTINCT` can compare it.)
pub(super) const TIES_SQL: &str = "pg_catalog.json_build_object( \
    'triggers', coalesce((SELECT pg_catalog.json_agg(pg_catalog.json_build_object( \
            'name', t.tgname, 'definition', pg_catalog.pg_get_triggerdef(t.oid), \
            'comment', pg_catalog.obj_description(t.oid, 'pg_trigger')) ORDER BY t.tgname) \
        FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) v.oid AND NOT t.tgisinternal), '[]'), \
    'rules', coalesce((SELECT pg_catalog.json_agg(pg_catalog.json_build_object( \
            'name', r.rulename, 'definition', pg_catalog.pg_get_ruledef(r.oid), \
            'comment', pg_catalog.obj_description(r.oid, 'pg_rewrite')) ORDER BY r.rulename) \
        FROM pg_catalog.pg_rewrite r WHERE r.ev_class OPERATOR(pg_catalog.=) v.oid \
         AND r.rulename OPERATOR(pg_catalog.<>) '_RETURN'), '[]'), \
    'columns', coalesce((SELECT pg_catalog.json_agg(pg_catalog.json_build_object( \
            'name', a.attname, 'default', pg_catalog.pg_get_expr(ad.adbin, ad.adrelid), \
            'comment', pg_catalog.col_description(v.oid, a.attnum), \
            'grants', coalesce((SELECT pg_catalog.json_agg(pg_catalog.json_build_object( \
                    'grantee', CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' \
                                    ELSE pg_catalog.pg_get_userbyid(x.grantee)::pg_catalog.text END, \
                    'privilege', x.privilege_type, 'grantable', x.is_grantable) \
                    ORDER BY x.grantee, x.privilege_type) \
                FROM pg_catalog.aclexplode(a.attacl) x WHERE x.grantee OPERATOR(pg_catalog.<>) v.relowner), '[]')) \
            ORDER BY a.attnum) \
        FROM pg_catalog.pg_attribute a \
        LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid OPERATOR(pg_catalog.=) a.attrelid \
              AND ad.adnum OPERATOR(pg_catalog.=) a.attnum \
       WHERE a.attrelid OPERATOR(pg_catalog.=) v.oid AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped), '[]') \
    )::pg_catalog.text";

impl Ties {
    /// The ties of `view` from [`TIES_SQL`]'s text.
    pub(super) fn parse(view: &QualifiedName, text: &str) -> Result<Self, CasError> {
        serde_json::from_str(text).map_err(|e| {
            CasError::Record(format!(
                "the triggers, rules and columns of view {view} could not be read back: {e}"
            ))
        })
    }

    /// After `CREATE OR REPLACE VIEW`: each rule dropped and made again, so that its
    /// actions name the new table, with its comment.
    pub(super) fn rebind_rules(&self, view: &QualifiedName) -> Result<Vec<String>, CasError> {
        let mut out = Vec::new();
        for rule in &self.rules {
            out.push(format!("DROP RULE {} ON {view}", quote_ident(&rule.name)));
            out.extend(rule_statements(view, rule)?);
        }
        Ok(out)
    }

    /// After `DROP VIEW` and `CREATE VIEW`, while the engine's role still owns the
    /// view: column defaults and comments, triggers and rules with their comments.
    pub(super) fn before_owner(&self, view: &QualifiedName) -> Result<Vec<String>, CasError> {
        let mut out = Vec::new();
        for column in &self.columns {
            let name = quote_ident(&column.name);
            if let Some(default) = &column.default {
                // A default is an expression the server printed; parsed to be sure it
                // is exactly one.
                let sql = format!("ALTER VIEW {view} ALTER COLUMN {name} SET DEFAULT {default}");
                out.push(one_statement(view, "column default", sql)?);
            }
            if let Some(comment) = &column.comment {
                out.push(format!(
                    "COMMENT ON COLUMN {view}.{name} IS {}",
                    quote_literal(comment)
                ));
            }
        }
        for trigger in &self.triggers {
            out.push(one_statement(view, "trigger", trigger.definition.clone())?);
            if let Some(comment) = &trigger.comment {
                out.push(format!(
                    "COMMENT ON TRIGGER {} ON {view} IS {}",
                    quote_ident(&trigger.name),
                    quote_literal(comment)
                ));
            }
        }
        for rule in &self.rules {
            out.extend(rule_statements(view, rule)?);
        }
        Ok(out)
    }

    /// After the owner is set: the column grants, made by the owner as the view's
    /// own grants are.
    pub(super) fn after_owner(&self, view: &QualifiedName) -> Vec<String> {
        let mut out = Vec::new();
        for column in &self.columns {
            for grant in &column.grants {
                let grantee = if grant.grantee == "PUBLIC" {
                    grant.grantee.clone()
                } else {
                    quote_ident(&grant.grantee)
                };
                out.push(format!(
                    "GRANT {} ({}) ON {view} TO {grantee}{}",
                    grant.privilege,
                    quote_ident(&column.name),
                    if grant.grantable {
                        " WITH GRANT OPTION"
                    } else {
                        ""
                    }
                ));
            }
        }
        out
    }
}

fn rule_statements(view: &QualifiedName, rule: &Printed) -> Result<Vec<String>, CasError> {
    let definition = rule.definition.trim().trim_end_matches(';').to_owned();
    let mut out = vec![one_statement(view, "rule", definition)?];
    if let Some(comment) = &rule.comment {
        out.push(format!(
            "COMMENT ON RULE {} ON {view} IS {}",
            quote_ident(&rule.name),
            quote_literal(comment)
        ));
    }
    Ok(out)
}

/// `sql`, if it parses as exactly one statement (a definition the server printed is
/// never pasted otherwise).
fn one_statement(view: &QualifiedName, what: &str, sql: String) -> Result<String, CasError> {
    match pgshift_sql::parse(&sql) {
        Ok(statements) if statements.len() == 1 => Ok(sql),
        _ => Err(CasError::Record(format!(
            "a {what} of view {view} does not parse back as one statement"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> QualifiedName {
        QualifiedName::qualified("public".to_owned(), "v".to_owned())
    }

    #[test]
    fn a_printed_definition_that_is_more_than_one_statement_is_an_error_not_sql() {
        let ties = Ties::parse(
            &view(),
            r#"{"triggers": [], "rules": [{"name": "r", "definition": "CREATE RULE r AS ON DELETE TO public.v DO INSTEAD NOTHING; DROP TABLE x;", "comment": null}], "columns": []}"#,
        )
        .expect("parses");
        assert!(ties.before_owner(&view()).is_err());
        assert!(ties.rebind_rules(&view()).is_err());
    }

    #[test]
    fn names_and_comments_are_quoted() {
        let ties = Ties::parse(
            &view(),
            r#"{"triggers": [], "rules": [], "columns": [{"name": "we\"ird", "default": null, "comment": "it's", "grants": [{"grantee": "Some One", "privilege": "UPDATE", "grantable": true}]}]}"#,
        )
        .expect("parses");
        assert_eq!(
            ties.before_owner(&view()).expect("statements"),
            vec![r#"COMMENT ON COLUMN "public"."v"."we""ird" IS 'it''s'"#.to_owned()]
        );
        assert_eq!(
            ties.after_owner(&view()),
            vec![
                r#"GRANT UPDATE ("we""ird") ON "public"."v" TO "Some One" WITH GRANT OPTION"#
                    .to_owned()
            ]
        );
    }

    #[test]
    fn text_that_is_not_the_ties_is_an_error() {
        assert!(Ties::parse(&view(), "{}").is_err());
        assert!(Ties::parse(&view(), "not json").is_err());
    }
}
