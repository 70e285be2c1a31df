//! The functions a migration calls by name, as far as the relations their bodies lock
//! go: for every function or procedure of that name the server would consider (in the
//! named schema, or in the user's search path with `pg_catalog` first), the definition
//! of each one written in SQL (`pg_get_functiondef`), so the classifier can read what
//! its body reads and writes. Functions in `pg_catalog` and functions in other
//! languages get no definition: their locks are not read from a body.
//!
//! Every overload of the name is read (which one a call picks depends on argument types
//! the classifier does not know), so the statement is what all of them lock together.
//!
//! Every catalog object is schema-qualified and every name is a parameter (SE-1).
//! `pg_get_functiondef` takes no relation lock.

use pgshift_sql::QualifiedName;
use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::FunctionFacts;

const STEP: &str = "called functions";

/// Each name (`$1` schemas, NULL for unqualified; `$2` names) with every function or
/// procedure it may denote (`$3`: the schemas of the search path), and the definition
/// of those written in SQL outside `pg_catalog`.
const FUNCTIONS_SQL: &str = "\
SELECT w.i,
       CASE WHEN l.lanname OPERATOR(pg_catalog.=) 'sql'
                 AND (p.prokind OPERATOR(pg_catalog.=) 'f' OR p.prokind OPERATOR(pg_catalog.=) 'p')
                 AND n.nspname OPERATOR(pg_catalog.<>) 'pg_catalog'
            THEN pg_catalog.pg_get_functiondef(p.oid) END AS definition
  FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) WITH ORDINALITY AS w(schema, name, i)
  JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) w.name::pg_catalog.name
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
  JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang
 WHERE CASE WHEN w.schema IS NULL
            THEN n.nspname OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.name[])
            ELSE n.nspname OPERATOR(pg_catalog.=) w.schema::pg_catalog.name END
 ORDER BY w.i, n.nspname, p.oid";

/// The facts of each function name in `names`, in order.
pub(super) async fn read(
    client: &Client,
    names: &[QualifiedName],
    search_path: &[String],
) -> Result<Vec<FunctionFacts>, CatalogError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let schemas: Vec<Option<&str>> = names.iter().map(|n| n.schema.as_deref()).collect();
    let bare: Vec<&str> = names.iter().map(|n| n.name.as_str()).collect();
    let mut facts: Vec<FunctionFacts> = names
        .iter()
        .map(|name| FunctionFacts {
            written: name.clone(),
            found: false,
            sql_definitions: Vec::new(),
        })
        .collect();
    for row in query(
        client,
        STEP,
        FUNCTIONS_SQL,
        &[&schemas, &bare, &search_path],
    )
    .await?
    {
        let fields = Fields::new(&row, STEP);
        let position: i64 = fields.get("i")?;
        let entry = usize::try_from(position - 1)
            .ok()
            .and_then(|index| facts.get_mut(index))
            .ok_or(CatalogError::UnexpectedValue {
                step: STEP,
                what: "function ordinality",
            })?;
        entry.found = true;
        if let Some(definition) = fields.get::<Option<String>>("definition")? {
            entry.sql_definitions.push(definition);
        }
    }
    Ok(facts)
}
