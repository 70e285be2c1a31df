//! Resolving names as written to relation OIDs, the way PostgreSQL resolves them for
//! the user.
//!
//! A qualified name is looked up in its schema (`pg_temp` meaning the session's
//! temporary schema). An unqualified name is looked up through the user's
//! `search_path` as `recomputeNamespacePath` builds it: `$user` stands for
//! `current_user`, schemas that do not exist or lack `USAGE` are skipped, duplicates
//! are dropped, `pg_catalog` is searched first unless listed, and the session's
//! temporary schema before everything unless listed.
//!
//! Two queries: the OIDs of every schema named anywhere, then every `pg_class` row
//! with one of the written names in one of those schemas. The search order itself is
//! applied here, in Rust.

use std::collections::HashMap;

use pgshift_sql::QualifiedName;
use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use super::server::SessionFacts;

const STEP: &str = "resolve";

/// The special search-path entry for the role's own schema.
const USER_ENTRY: &str = "$user";
/// The alias of the session's temporary schema.
const TEMP_ALIAS: &str = "pg_temp";
/// The system catalog schema.
const CATALOG_SCHEMA: &str = "pg_catalog";

const NAMESPACES_SQL: &str = "\
SELECT w.i, n.oid, pg_catalog.has_schema_privilege(n.oid, 'USAGE') AS usable
  FROM pg_catalog.unnest($1::pg_catalog.text[]) WITH ORDINALITY AS w(nspname, i)
  JOIN pg_catalog.pg_namespace n
    ON n.nspname OPERATOR(pg_catalog.=) w.nspname::pg_catalog.name";

const RELATIONS_SQL: &str = "\
SELECT w.i, c.oid, c.relnamespace
  FROM pg_catalog.unnest($1::pg_catalog.text[]) WITH ORDINALITY AS w(relname, i)
  JOIN pg_catalog.pg_class c
    ON c.relname OPERATOR(pg_catalog.=) w.relname::pg_catalog.name
 WHERE c.relnamespace OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.oid[])";

/// The outcome of resolution.
#[derive(Debug, Default)]
pub(super) struct Resolved {
    /// Distinct relation OIDs, in order of first mention.
    pub(super) oids: Vec<u32>,
    /// Each distinct name as written, with the index of its OID in `oids`.
    pub(super) resolutions: Vec<(QualifiedName, Option<usize>)>,
}

/// A schema found by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Namespace {
    /// `pg_namespace.oid`.
    pub(super) oid: u32,
    /// Whether the current role has `USAGE` on it.
    pub(super) usable: bool,
}

/// Resolves `names` for a user whose `search_path` is `user_search_path`.
pub(super) async fn resolve(
    client: &Client,
    session: &SessionFacts,
    names: &[QualifiedName],
    user_search_path: &[String],
) -> Result<Resolved, CatalogError> {
    let mut written: Vec<QualifiedName> = Vec::new();
    for name in names {
        if !written.contains(name) {
            written.push(name.clone());
        }
    }
    if written.is_empty() {
        return Ok(Resolved::default());
    }
    let namespaces = read_namespaces(
        client,
        &schema_names(&written, user_search_path, &session.current_user),
    )
    .await?;
    let catalog = namespaces
        .get(CATALOG_SCHEMA)
        .ok_or(CatalogError::UnexpectedValue {
            step: STEP,
            what: "pg_catalog namespace",
        })?
        .oid;
    let path = relation_search_path(
        user_search_path,
        &namespaces,
        &session.current_user,
        session.temp_schema,
        catalog,
    );
    let candidates: Vec<Vec<u32>> = written
        .iter()
        .map(|name| match &name.schema {
            Some(schema) => explicit_namespace(schema, &namespaces, session.temp_schema)
                .into_iter()
                .collect(),
            None => path.clone(),
        })
        .collect();
    let found = read_relations(client, &written, &candidates).await?;
    Ok(pick(written, &candidates, &found))
}

/// Every schema name the resolution may need, `pg_catalog` included.
fn schema_names(written: &[QualifiedName], path: &[String], current_user: &str) -> Vec<String> {
    let mut names = vec![CATALOG_SCHEMA.to_owned()];
    let mut add = |name: &str| {
        if name != TEMP_ALIAS && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    };
    for entry in path {
        add(if entry == USER_ENTRY {
            current_user
        } else {
            entry
        });
    }
    for name in written {
        if let Some(schema) = &name.schema {
            add(schema);
        }
    }
    names
}

async fn read_namespaces(
    client: &Client,
    names: &[String],
) -> Result<HashMap<String, Namespace>, CatalogError> {
    let rows = query(client, STEP, NAMESPACES_SQL, &[&names]).await?;
    let mut found = HashMap::new();
    for row in &rows {
        let fields = Fields::new(row, STEP);
        let position: i64 = fields.get("i")?;
        let name = usize::try_from(position)
            .ok()
            .and_then(|p| p.checked_sub(1))
            .and_then(|p| names.get(p))
            .ok_or(CatalogError::UnexpectedValue {
                step: STEP,
                what: "schema ordinality",
            })?;
        found.insert(
            name.clone(),
            Namespace {
                oid: fields.get("oid")?,
                usable: fields.get("usable")?,
            },
        );
    }
    Ok(found)
}

/// The namespace a qualified name's schema denotes (`pg_temp`: the session's
/// temporary schema, if it has one).
pub(super) fn explicit_namespace(
    schema: &str,
    namespaces: &HashMap<String, Namespace>,
    temp_schema: Option<u32>,
) -> Option<u32> {
    if schema == TEMP_ALIAS {
        return temp_schema;
    }
    namespaces.get(schema).map(|namespace| namespace.oid)
}

/// The namespaces PostgreSQL searches for an unqualified relation name, in order.
pub(super) fn relation_search_path(
    entries: &[String],
    namespaces: &HashMap<String, Namespace>,
    current_user: &str,
    temp_schema: Option<u32>,
    catalog: u32,
) -> Vec<u32> {
    let mut path: Vec<u32> = Vec::new();
    for entry in entries {
        let oid = if entry == TEMP_ALIAS {
            temp_schema
        } else {
            let name = if entry == USER_ENTRY {
                current_user
            } else {
                entry
            };
            namespaces
                .get(name)
                .filter(|namespace| namespace.usable)
                .map(|namespace| namespace.oid)
        };
        if let Some(oid) = oid {
            if !path.contains(&oid) {
                path.push(oid);
            }
        }
    }
    if !path.contains(&catalog) {
        path.insert(0, catalog);
    }
    if let Some(temp) = temp_schema {
        if !path.contains(&temp) {
            path.insert(0, temp);
        }
    }
    path
}

async fn read_relations(
    client: &Client,
    written: &[QualifiedName],
    candidates: &[Vec<u32>],
) -> Result<HashMap<(usize, u32), u32>, CatalogError> {
    let relnames: Vec<String> = written.iter().map(|name| name.name.clone()).collect();
    let mut namespaces: Vec<u32> = candidates.iter().flatten().copied().collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let rows = query(client, STEP, RELATIONS_SQL, &[&relnames, &namespaces]).await?;
    let mut found = HashMap::new();
    for row in &rows {
        let fields = Fields::new(row, STEP);
        let position: i64 = fields.get("i")?;
        let index = usize::try_from(position)
            .ok()
            .and_then(|p| p.checked_sub(1))
            .filter(|p| *p < written.len())
            .ok_or(CatalogError::UnexpectedValue {
                step: STEP,
                what: "relation ordinality",
            })?;
        found.insert(
            (index, fields.get::<u32>("relnamespace")?),
            fields.get::<u32>("oid")?,
        );
    }
    Ok(found)
}

/// Applies each name's search order to the rows found, deduplicating by OID.
fn pick(
    written: Vec<QualifiedName>,
    candidates: &[Vec<u32>],
    found: &HashMap<(usize, u32), u32>,
) -> Resolved {
    let mut resolved = Resolved::default();
    for (index, name) in written.into_iter().enumerate() {
        let oid = candidates
            .get(index)
            .into_iter()
            .flatten()
            .find_map(|namespace| found.get(&(index, *namespace)).copied());
        let position = oid.map(|oid| {
            resolved
                .oids
                .iter()
                .position(|known| *known == oid)
                .unwrap_or_else(|| {
                    resolved.oids.push(oid);
                    resolved.oids.len() - 1
                })
        });
        resolved.resolutions.push((name, position));
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATALOG: u32 = 11;
    const PUBLIC: u32 = 2200;
    const APP: u32 = 5000;
    const ALICE: u32 = 5001;
    const LOCKED: u32 = 5002;
    const TEMP: u32 = 6000;

    fn namespaces() -> HashMap<String, Namespace> {
        [
            ("pg_catalog", CATALOG, true),
            ("public", PUBLIC, true),
            ("app", APP, true),
            ("alice", ALICE, true),
            ("locked", LOCKED, false),
        ]
        .into_iter()
        .map(|(name, oid, usable)| (name.to_owned(), Namespace { oid, usable }))
        .collect()
    }

    fn path(entries: &[&str], temp: Option<u32>) -> Vec<u32> {
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        relation_search_path(&entries, &namespaces(), "alice", temp, CATALOG)
    }

    #[test]
    fn catalog_and_temp_come_first_unless_listed() {
        assert_eq!(path(&["app", "public"], None), [CATALOG, APP, PUBLIC]);
        assert_eq!(
            path(&["app", "public"], Some(TEMP)),
            [TEMP, CATALOG, APP, PUBLIC]
        );
        assert_eq!(
            path(&["app", "pg_catalog", "pg_temp"], Some(TEMP)),
            [APP, CATALOG, TEMP]
        );
        assert_eq!(path(&["pg_temp", "app"], None), [CATALOG, APP]);
    }

    #[test]
    fn user_entry_missing_and_unusable_schemas() {
        assert_eq!(
            path(&["$user", "public", "nowhere", "locked", "public"], None),
            [CATALOG, ALICE, PUBLIC]
        );
        let entries = vec!["$user".to_owned()];
        assert_eq!(
            relation_search_path(&entries, &namespaces(), "bob", None, CATALOG),
            [CATALOG]
        );
    }

    #[test]
    fn explicit_schemas_ignore_usage_and_map_pg_temp() {
        let namespaces = namespaces();
        assert_eq!(
            explicit_namespace("locked", &namespaces, None),
            Some(LOCKED)
        );
        assert_eq!(
            explicit_namespace("pg_temp", &namespaces, Some(TEMP)),
            Some(TEMP)
        );
        assert_eq!(explicit_namespace("pg_temp", &namespaces, None), None);
        assert_eq!(explicit_namespace("nowhere", &namespaces, None), None);
    }

    #[test]
    fn schema_names_expand_user_and_skip_pg_temp() {
        let written = vec![
            QualifiedName::qualified("app", "t"),
            QualifiedName::qualified("pg_temp", "t"),
            QualifiedName::bare("t"),
        ];
        let path = vec![
            "$user".to_owned(),
            "pg_temp".to_owned(),
            "public".to_owned(),
        ];
        assert_eq!(
            schema_names(&written, &path, "alice"),
            ["pg_catalog", "alice", "public", "app"]
        );
    }

    #[test]
    fn pick_follows_order_and_deduplicates() {
        let written = vec![
            QualifiedName::bare("t"),
            QualifiedName::qualified("app", "t"),
            QualifiedName::bare("gone"),
            QualifiedName::qualified("public", "t"),
        ];
        let candidates = vec![
            vec![CATALOG, APP, PUBLIC],
            vec![APP],
            vec![CATALOG, APP],
            vec![PUBLIC],
        ];
        let found: HashMap<(usize, u32), u32> = [
            ((0, APP), 100),
            ((0, PUBLIC), 200),
            ((1, APP), 100),
            ((3, PUBLIC), 200),
        ]
        .into_iter()
        .collect();
        let resolved = pick(written.clone(), &candidates, &found);
        assert_eq!(resolved.oids, [100, 200]);
        let positions: Vec<Option<usize>> = resolved.resolutions.iter().map(|(_, p)| *p).collect();
        assert_eq!(positions, [Some(0), Some(0), None, Some(1)]);
        assert_eq!(resolved.resolutions[2].0, written[2]);
    }
}
