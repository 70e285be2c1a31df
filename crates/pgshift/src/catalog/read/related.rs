//! Relations that stand in a [`Role`] to the relations (and other objects) a migration
//! names: what a statement locks without naming it.
//!
//! For relations: descendants and parents (`pg_inherits`), what is dropped with them
//! and what CASCADE reaches (`pg_depend`, walked like `findDependentObjects`: down to
//! dependents, up from an internal part to its owner, a column's dependents only for
//! that column), a view's base relations at every level, the relations each rule and
//! policy depends on, and owned sequences. For types and domains: every table using
//! them (through domains, arrays and composite types) and the CASCADE closure; for
//! schemas: their relations and the closure; for publications and statistics objects:
//! their tables.
//!
//! Every catalog object is schema-qualified and every name is a parameter (SE-1).

use std::collections::HashMap;

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::{ObjectFacts, RelatedFacts, RelationKind};
use crate::lock::{ObjectClass, ObjectRef, Role};

const STEP: &str = "related relations";
const OBJECTS_STEP: &str = "related objects";

/// Descendants at every level, and direct parents.
const INHERITANCE_SQL: &str = "\
WITH RECURSIVE down(root, oid) AS (
    SELECT i.inhparent, i.inhrelid FROM pg_catalog.pg_inherits i
     WHERE i.inhparent OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
    UNION
    SELECT down.root, i.inhrelid FROM down
      JOIN pg_catalog.pg_inherits i ON i.inhparent OPERATOR(pg_catalog.=) down.oid
), pairs(root, role, oid) AS (
    SELECT root, 'descendants', oid FROM down
    UNION ALL
    SELECT i.inhrelid, 'parent', i.inhparent FROM pg_catalog.pg_inherits i
     WHERE i.inhrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
)
SELECT p.root, p.role, NULL::pg_catalog.text AS via, n.nspname, c.relname, c.relkind
  FROM pairs p
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.oid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 ORDER BY 1, 2, 4, 5";

/// The dependency closure of each root object (`$1` classes, `$2` OIDs), following
/// the dependency types `$3`; each object reached is mapped to the relations it
/// belongs to or touches (an index to its table: indexes and TOAST tables are locked
/// with their tables, so they are not listed).
const CLOSURE_SQL: &str = "\
WITH RECURSIVE walk(root, rootclass, classid, objid, objsubid) AS (
    SELECT r.objid, r.classid, r.classid, r.objid, 0
      FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.oid[]), pg_catalog.unnest($2::pg_catalog.oid[])) AS r(classid, objid)
    UNION
    SELECT w.root, w.rootclass, x.classid, x.objid, x.objsubid
      FROM walk w
      CROSS JOIN LATERAL (
        SELECT d.classid, d.objid, d.objsubid FROM pg_catalog.pg_depend d
         WHERE d.refclassid OPERATOR(pg_catalog.=) w.classid
           AND d.refobjid OPERATOR(pg_catalog.=) w.objid
           AND (w.objsubid OPERATOR(pg_catalog.=) 0 OR d.refobjsubid OPERATOR(pg_catalog.=) w.objsubid)
           AND d.deptype OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.\"char\"[])
        UNION ALL
        SELECT d.refclassid, d.refobjid, d.refobjsubid FROM pg_catalog.pg_depend d
         WHERE d.classid OPERATOR(pg_catalog.=) w.classid
           AND d.objid OPERATOR(pg_catalog.=) w.objid
           AND d.objsubid OPERATOR(pg_catalog.=) w.objsubid
           AND d.deptype OPERATOR(pg_catalog.=) ANY ('{i,P}'::pg_catalog.\"char\"[])
           AND (w.classid OPERATOR(pg_catalog.<>) w.rootclass OR w.objid OPERATOR(pg_catalog.<>) w.root)
      ) x
), touched(root, oid) AS (
    SELECT w.root, w.objid FROM walk w
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, x.indrelid FROM walk w JOIN pg_catalog.pg_index x ON x.indexrelid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, k.conrelid FROM walk w JOIN pg_catalog.pg_constraint k ON k.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, k.confrelid FROM walk w JOIN pg_catalog.pg_constraint k ON k.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, t.tgrelid FROM walk w JOIN pg_catalog.pg_trigger t ON t.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, r.ev_class FROM walk w JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, p.polrelid FROM walk w JOIN pg_catalog.pg_policy p ON p.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_policy'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, a.adrelid FROM walk w JOIN pg_catalog.pg_attrdef a ON a.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, s.stxrelid FROM walk w JOIN pg_catalog.pg_statistic_ext s ON s.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, t.typrelid FROM walk w JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid
    UNION SELECT w.root, p.prrelid FROM walk w JOIN pg_catalog.pg_publication_rel p ON p.oid OPERATOR(pg_catalog.=) w.objid
     WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_publication_rel'::pg_catalog.regclass::pg_catalog.oid
)
SELECT t.root, $4::pg_catalog.text AS role, NULL::pg_catalog.text AS via, n.nspname, c.relname, c.relkind
  FROM touched t
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.oid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 WHERE t.oid OPERATOR(pg_catalog.<>) t.root
   AND c.relkind OPERATOR(pg_catalog.<>) ALL ('{i,I,t}'::pg_catalog.\"char\"[])
 ORDER BY 1, 4, 5";

/// Base relations of views at every level; relations each rule (other than a view's
/// own) and policy depends on; sequences a table owns; other tables whose indexes,
/// constraints or statistics use a table's row type.
const USES_SQL: &str = "\
WITH RECURSIVE base(root, oid) AS (
    SELECT c.oid, c.oid FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
       AND c.relkind OPERATOR(pg_catalog.=) ANY ('{v,m}'::pg_catalog.\"char\"[])
    UNION
    SELECT base.root, d.refobjid FROM base
      JOIN pg_catalog.pg_rewrite r ON r.ev_class OPERATOR(pg_catalog.=) base.oid
                                  AND r.rulename OPERATOR(pg_catalog.=) '_RETURN'
      JOIN pg_catalog.pg_depend d
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass::pg_catalog.oid
       AND d.objid OPERATOR(pg_catalog.=) r.oid
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
     WHERE d.refobjid OPERATOR(pg_catalog.<>) base.oid
), pairs(root, role, via, oid) AS (
    SELECT root, 'view-base-relations', NULL::pg_catalog.text, oid FROM base
     WHERE oid OPERATOR(pg_catalog.<>) root
    UNION
    SELECT r.ev_class, 'rule-relations', r.rulename::pg_catalog.text, d.refobjid
      FROM pg_catalog.pg_rewrite r
      JOIN pg_catalog.pg_depend d
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass::pg_catalog.oid
       AND d.objid OPERATOR(pg_catalog.=) r.oid
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
     WHERE r.ev_class OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
       AND r.rulename OPERATOR(pg_catalog.<>) '_RETURN'
       AND d.refobjid OPERATOR(pg_catalog.<>) r.ev_class
    UNION
    SELECT p.polrelid, 'policy-relations', p.polname::pg_catalog.text, d.refobjid
      FROM pg_catalog.pg_policy p
      JOIN pg_catalog.pg_depend d
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_policy'::pg_catalog.regclass::pg_catalog.oid
       AND d.objid OPERATOR(pg_catalog.=) p.oid
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
     WHERE p.polrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
       AND d.refobjid OPERATOR(pg_catalog.<>) p.polrelid
    UNION
    SELECT d.refobjid, 'owned-sequences', NULL::pg_catalog.text, d.objid
      FROM pg_catalog.pg_depend d
      JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) d.objid
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
       AND d.refobjid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
       AND d.deptype OPERATOR(pg_catalog.=) ANY ('{a,i}'::pg_catalog.\"char\"[])
       AND s.relkind OPERATOR(pg_catalog.=) 'S'
    UNION
    SELECT t.oid, 'row-type-users', NULL::pg_catalog.text, u.relid
      FROM pg_catalog.pg_class t
      JOIN pg_catalog.pg_depend d
        ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid
       AND d.refobjid OPERATOR(pg_catalog.=) t.reltype
      CROSS JOIN LATERAL (
        SELECT x.indrelid AS relid FROM pg_catalog.pg_index x
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
           AND x.indexrelid OPERATOR(pg_catalog.=) d.objid
        UNION ALL
        SELECT k.conrelid FROM pg_catalog.pg_constraint k
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::pg_catalog.regclass::pg_catalog.oid
           AND k.oid OPERATOR(pg_catalog.=) d.objid
        UNION ALL
        SELECT x.stxrelid FROM pg_catalog.pg_statistic_ext x
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass::pg_catalog.oid
           AND x.oid OPERATOR(pg_catalog.=) d.objid
      ) u
     WHERE t.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
       AND u.relid OPERATOR(pg_catalog.<>) t.oid
)
SELECT p.root, p.role, p.via, n.nspname, c.relname, c.relkind
  FROM pairs p
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.oid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 ORDER BY 1, 2, 3, 4, 5";

/// Tables referencing each root (or one of its partitions, whose foreign keys are
/// cloned) by foreign key, at every level.
const REFERENCING_SQL: &str = "\
WITH RECURSIVE refs(root, oid) AS (
    SELECT k.confrelid, k.conrelid FROM pg_catalog.pg_constraint k
     WHERE k.contype OPERATOR(pg_catalog.=) 'f'
       AND k.confrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
    UNION
    SELECT refs.root, k.conrelid FROM refs
      JOIN pg_catalog.pg_constraint k ON k.contype OPERATOR(pg_catalog.=) 'f'
                                     AND k.confrelid OPERATOR(pg_catalog.=) refs.oid
)
SELECT r.root, 'referencing-tables'::pg_catalog.text AS role, NULL::pg_catalog.text AS via,
       n.nspname, c.relname, c.relkind
  FROM refs r
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.oid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 WHERE r.oid OPERATOR(pg_catalog.<>) r.root
 ORDER BY 1, 4, 5";

/// Candidate objects by name: `$1` classes (as text), `$2` names, each with the
/// schema OID it is in.
const FIND_SQL: &str = "\
SELECT w.i, o.oid, o.nsp
  FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) WITH ORDINALITY AS w(class, name, i)
  JOIN LATERAL (
    SELECT t.oid, t.typnamespace AS nsp FROM pg_catalog.pg_type t
     WHERE w.class OPERATOR(pg_catalog.=) 'type' AND t.typname OPERATOR(pg_catalog.=) w.name::pg_catalog.name
    UNION ALL
    SELECT s.oid, 0::pg_catalog.oid FROM pg_catalog.pg_namespace s
     WHERE w.class OPERATOR(pg_catalog.=) 'schema' AND s.nspname OPERATOR(pg_catalog.=) w.name::pg_catalog.name
    UNION ALL
    SELECT p.oid, 0::pg_catalog.oid FROM pg_catalog.pg_publication p
     WHERE w.class OPERATOR(pg_catalog.=) 'publication' AND p.pubname OPERATOR(pg_catalog.=) w.name::pg_catalog.name
    UNION ALL
    SELECT x.oid, x.stxnamespace FROM pg_catalog.pg_statistic_ext x
     WHERE w.class OPERATOR(pg_catalog.=) 'statistics' AND x.stxname OPERATOR(pg_catalog.=) w.name::pg_catalog.name
  ) o ON true";

/// Schema OIDs by name.
const NAMESPACES_SQL: &str = "\
SELECT n.nspname::pg_catalog.text AS nspname, n.oid FROM pg_catalog.pg_namespace n
 WHERE n.nspname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])";

/// Tables of types, relations of schemas, tables of publications and statistics
/// objects (`$1` classes as text, `$2` OIDs).
const OBJECT_SQL: &str = "\
WITH RECURSIVE types(root, typ) AS (
    SELECT r.oid, r.oid FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.oid[])) AS r(class, oid)
     WHERE r.class OPERATOR(pg_catalog.=) 'type'
    UNION
    SELECT types.root, x.oid FROM types
      CROSS JOIN LATERAL (
        SELECT t.oid FROM pg_catalog.pg_type t
         WHERE t.typbasetype OPERATOR(pg_catalog.=) types.typ OR t.typelem OPERATOR(pg_catalog.=) types.typ
        UNION ALL
        SELECT c.reltype FROM pg_catalog.pg_attribute a
          JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid
         WHERE a.atttypid OPERATOR(pg_catalog.=) types.typ AND NOT a.attisdropped
           AND c.relkind OPERATOR(pg_catalog.=) 'c'
        UNION ALL
        SELECT g.rngtypid FROM pg_catalog.pg_range g WHERE g.rngsubtype OPERATOR(pg_catalog.=) types.typ
      ) x
), pairs(root, role, oid) AS (
    SELECT t.root, 'tables-of-type', a.attrelid FROM types t
      JOIN pg_catalog.pg_attribute a ON a.atttypid OPERATOR(pg_catalog.=) t.typ AND NOT a.attisdropped
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid
     WHERE c.relkind OPERATOR(pg_catalog.<>) 'c'
    UNION
    SELECT t.root, 'tables-of-type', c.oid FROM types t
      JOIN pg_catalog.pg_class c ON c.reloftype OPERATOR(pg_catalog.=) t.typ
                                OR (c.reltype OPERATOR(pg_catalog.=) t.typ AND c.relkind OPERATOR(pg_catalog.=) 'c')
    UNION
    SELECT r.oid, 'schema-relations', c.oid
      FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.oid[])) AS r(class, oid)
      JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) r.oid
     WHERE r.class OPERATOR(pg_catalog.=) 'schema'
    UNION
    SELECT r.oid, 'publication-tables', p.prrelid
      FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.oid[])) AS r(class, oid)
      JOIN pg_catalog.pg_publication_rel p ON p.prpubid OPERATOR(pg_catalog.=) r.oid
     WHERE r.class OPERATOR(pg_catalog.=) 'publication'
    UNION
    SELECT r.oid, 'publication-tables', c.oid
      FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.oid[])) AS r(class, oid)
      JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.oid
      JOIN pg_catalog.pg_class c ON p.puballtables AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog.\"char\"[])
      JOIN pg_catalog.pg_namespace cn ON cn.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE r.class OPERATOR(pg_catalog.=) 'publication'
       AND cn.nspname OPERATOR(pg_catalog.<>) ALL ('{pg_catalog,information_schema,pg_toast}'::pg_catalog.name[])
    UNION
    SELECT r.oid, 'statistics-table', x.stxrelid
      FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.oid[])) AS r(class, oid)
      JOIN pg_catalog.pg_statistic_ext x ON x.oid OPERATOR(pg_catalog.=) r.oid
     WHERE r.class OPERATOR(pg_catalog.=) 'statistics'
)
SELECT p.root, p.role, NULL::pg_catalog.text AS via, n.nspname, c.relname, c.relkind
  FROM pairs p
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.oid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 ORDER BY 1, 2, 4, 5";

/// Publications' schemas (PostgreSQL 15+): the tables of each schema a publication
/// publishes.
const PUBLICATION_SCHEMAS_SQL: &str = "\
SELECT r.oid AS root, 'publication-tables'::pg_catalog.text AS role, NULL::pg_catalog.text AS via,
       n.nspname, c.relname, c.relkind
  FROM pg_catalog.unnest($1::pg_catalog.oid[]) AS r(oid)
  JOIN pg_catalog.pg_publication_namespace pn ON pn.pnpubid OPERATOR(pg_catalog.=) r.oid
  JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) pn.pnnspid
                            AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog.\"char\"[])
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 ORDER BY 1, 4, 5";

/// The related relations of each relation among `oids`, by relation OID.
pub(super) async fn read_for_relations(
    client: &Client,
    oids: &[u32],
) -> Result<HashMap<u32, Vec<RelatedFacts>>, CatalogError> {
    let mut related: HashMap<u32, Vec<RelatedFacts>> = HashMap::new();
    if oids.is_empty() {
        return Ok(related);
    }
    let class = pg_class_oid(client).await?;
    let classes = vec![class; oids.len()];
    let mut rows = query(client, STEP, INHERITANCE_SQL, &[&oids]).await?;
    rows.extend(query(client, STEP, USES_SQL, &[&oids]).await?);
    rows.extend(query(client, STEP, REFERENCING_SQL, &[&oids]).await?);
    for (role, deptypes) in closures() {
        rows.extend(
            query(
                client,
                STEP,
                CLOSURE_SQL,
                &[&classes, &oids, &deptypes, &role.as_str()],
            )
            .await?,
        );
    }
    for row in &rows {
        let (root, facts) = related_row(Fields::new(row, STEP))?;
        related.entry(root).or_default().push(facts);
    }
    Ok(related)
}

/// The closures read for every root: what is dropped with it, and what CASCADE
/// reaches (the `pg_depend.deptype`s followed).
fn closures() -> [(Role, Vec<i8>); 2] {
    let types = |chars: &str| chars.bytes().map(|b| b as i8).collect::<Vec<i8>>();
    [
        (Role::DroppedWith, types("aiPS")),
        (Role::CascadeDependents, types("naiPS")),
    ]
}

async fn pg_class_oid(client: &Client) -> Result<u32, CatalogError> {
    let rows = query(
        client,
        STEP,
        "SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid AS oid",
        &[],
    )
    .await?;
    let row = rows.first().ok_or(CatalogError::UnexpectedValue {
        step: STEP,
        what: "pg_class oid",
    })?;
    Fields::new(row, STEP).get("oid")
}

fn related_row(fields: Fields<'_>) -> Result<(u32, RelatedFacts), CatalogError> {
    let role: String = fields.get("role")?;
    let role = Role::ALL.into_iter().find(|r| r.as_str() == role).ok_or(
        CatalogError::UnexpectedValue {
            step: STEP,
            what: "role",
        },
    )?;
    Ok((
        fields.get("root")?,
        RelatedFacts {
            role,
            name: fields.name("nspname", "relname")?,
            kind: RelationKind::from_relkind(fields.required_char("relkind")?),
            via: fields.get("via")?,
        },
    ))
}

/// Facts of the objects other than relations a migration names, each resolved like
/// the server resolves it for the user: a qualified name in its schema, an unqualified
/// one through `search_path` (`pg_catalog` first unless listed; `$user` is
/// `current_user`). Schemas and publications have no schema part.
pub(super) async fn read_objects(
    client: &Client,
    objects: &[ObjectRef],
    user_search_path: &[String],
    current_user: &str,
    version_num: i32,
) -> Result<Vec<ObjectFacts>, CatalogError> {
    let objects: Vec<&ObjectRef> = objects
        .iter()
        .filter(|o| {
            !matches!(
                o.class,
                ObjectClass::Relation | ObjectClass::Function | ObjectClass::Other
            )
        })
        .collect();
    if objects.is_empty() {
        return Ok(Vec::new());
    }
    let path = search_path_names(user_search_path, current_user);
    let mut schema_names: Vec<String> = path.clone();
    schema_names.extend(objects.iter().filter_map(|o| o.name.schema.clone()));
    let rows = query(client, OBJECTS_STEP, NAMESPACES_SQL, &[&schema_names]).await?;
    let mut namespaces: HashMap<String, u32> = HashMap::new();
    for row in &rows {
        let fields = Fields::new(row, OBJECTS_STEP);
        namespaces.insert(fields.get("nspname")?, fields.get("oid")?);
    }
    let classes: Vec<&str> = objects.iter().map(|o| class_name(o.class)).collect();
    let names: Vec<&str> = objects.iter().map(|o| o.name.name.as_str()).collect();
    let rows = query(client, OBJECTS_STEP, FIND_SQL, &[&classes, &names]).await?;
    let mut candidates: Vec<Vec<(u32, u32)>> = vec![Vec::new(); objects.len()];
    for row in &rows {
        let fields = Fields::new(row, OBJECTS_STEP);
        let position: i64 = fields.get("i")?;
        let index = usize::try_from(position - 1).map_err(|_| CatalogError::UnexpectedValue {
            step: OBJECTS_STEP,
            what: "object ordinality",
        })?;
        if let Some(list) = candidates.get_mut(index) {
            list.push((fields.get("oid")?, fields.get("nsp")?));
        }
    }
    let found: Vec<Option<u32>> = objects
        .iter()
        .zip(&candidates)
        .map(|(object, list)| pick(object, list, &path, &namespaces))
        .collect();
    let resolved: Vec<(&str, u32)> = objects
        .iter()
        .zip(&found)
        .filter_map(|(object, oid)| oid.map(|oid| (class_name(object.class), oid)))
        .collect();
    let (classes, oids): (Vec<&str>, Vec<u32>) = resolved.iter().copied().unzip();
    let mut rows = query(client, OBJECTS_STEP, OBJECT_SQL, &[&classes, &oids]).await?;
    let publications: Vec<u32> = resolved
        .iter()
        .filter(|(class, _)| *class == "publication")
        .map(|(_, oid)| *oid)
        .collect();
    if version_num >= 150_000 && !publications.is_empty() {
        rows.extend(
            query(
                client,
                OBJECTS_STEP,
                PUBLICATION_SCHEMAS_SQL,
                &[&publications],
            )
            .await?,
        );
    }
    let catalog_classes = object_class_oids(client, &classes).await?;
    let closure_roots: Vec<(u32, u32)> = resolved
        .iter()
        .zip(&catalog_classes)
        .filter_map(|((_, oid), class)| class.map(|class| (class, *oid)))
        .collect();
    if !closure_roots.is_empty() {
        let (class_oids, root_oids): (Vec<u32>, Vec<u32>) = closure_roots.into_iter().unzip();
        for (role, deptypes) in closures() {
            rows.extend(
                query(
                    client,
                    OBJECTS_STEP,
                    CLOSURE_SQL,
                    &[&class_oids, &root_oids, &deptypes, &role.as_str()],
                )
                .await?,
            );
        }
    }
    let mut by_root: HashMap<u32, Vec<RelatedFacts>> = HashMap::new();
    for row in &rows {
        let (root, facts) = related_row(Fields::new(row, OBJECTS_STEP))?;
        by_root.entry(root).or_default().push(facts);
    }
    Ok(objects
        .iter()
        .zip(found)
        .map(|(object, oid)| ObjectFacts {
            written: (*object).clone(),
            found: oid.is_some(),
            related: oid
                .and_then(|oid| by_root.get(&oid).cloned())
                .unwrap_or_default(),
        })
        .collect())
}

/// The `pg_depend.classid` of each object class (`None`: no closure is read for it).
async fn object_class_oids(
    client: &Client,
    classes: &[&str],
) -> Result<Vec<Option<u32>>, CatalogError> {
    let rows = query(
        client,
        OBJECTS_STEP,
        "SELECT 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid AS type_class,
                'pg_catalog.pg_namespace'::pg_catalog.regclass::pg_catalog.oid AS schema_class",
        &[],
    )
    .await?;
    let row = rows.first().ok_or(CatalogError::UnexpectedValue {
        step: OBJECTS_STEP,
        what: "catalog class oids",
    })?;
    let fields = Fields::new(row, OBJECTS_STEP);
    let (type_class, schema_class): (u32, u32) =
        (fields.get("type_class")?, fields.get("schema_class")?);
    Ok(classes
        .iter()
        .map(|class| match *class {
            "type" => Some(type_class),
            "schema" => Some(schema_class),
            _ => None,
        })
        .collect())
}

fn class_name(class: ObjectClass) -> &'static str {
    match class {
        ObjectClass::Relation => "relation",
        ObjectClass::Type => "type",
        ObjectClass::Schema => "schema",
        ObjectClass::Publication => "publication",
        ObjectClass::Statistics => "statistics",
        ObjectClass::Function => "function",
        ObjectClass::Other => "other",
    }
}

/// The schema names an unqualified name is searched in, in order.
pub(super) fn search_path_names(user_search_path: &[String], current_user: &str) -> Vec<String> {
    let mut path: Vec<String> = Vec::new();
    for entry in user_search_path {
        let name = if entry == "$user" {
            current_user.to_owned()
        } else {
            entry.clone()
        };
        if !path.contains(&name) {
            path.push(name);
        }
    }
    if !path.iter().any(|p| p == "pg_catalog") {
        path.insert(0, "pg_catalog".to_owned());
    }
    path
}

/// The OID the server would pick among `candidates` (OID, schema OID).
fn pick(
    object: &ObjectRef,
    candidates: &[(u32, u32)],
    path: &[String],
    namespaces: &HashMap<String, u32>,
) -> Option<u32> {
    if matches!(object.class, ObjectClass::Schema | ObjectClass::Publication) {
        return candidates.first().map(|(oid, _)| *oid);
    }
    let schemas: Vec<u32> = match &object.name.schema {
        Some(schema) => namespaces.get(schema).copied().into_iter().collect(),
        None => path
            .iter()
            .filter_map(|name| namespaces.get(name).copied())
            .collect(),
    };
    schemas.iter().find_map(|schema| {
        candidates
            .iter()
            .find(|(_, nsp)| nsp == schema)
            .map(|(oid, _)| *oid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgshift_sql::QualifiedName;

    #[test]
    fn search_path_puts_the_catalog_first_and_expands_user() {
        let path = search_path_names(&["$user".to_owned(), "public".to_owned()], "alice");
        assert_eq!(path, ["pg_catalog", "alice", "public"]);
        let path = search_path_names(&["app".to_owned(), "pg_catalog".to_owned()], "alice");
        assert_eq!(path, ["app", "pg_catalog"]);
    }

    #[test]
    fn pick_follows_the_path_order() {
        let namespaces: HashMap<String, u32> = [("pg_catalog", 11), ("app", 20), ("public", 30)]
            .into_iter()
            .map(|(n, o)| (n.to_owned(), o))
            .collect();
        let path = vec![
            "pg_catalog".to_owned(),
            "app".to_owned(),
            "public".to_owned(),
        ];
        let object = ObjectRef {
            class: ObjectClass::Type,
            name: QualifiedName::bare("mood"),
        };
        assert_eq!(
            pick(&object, &[(7, 30), (8, 20)], &path, &namespaces),
            Some(8)
        );
        let qualified = ObjectRef {
            class: ObjectClass::Type,
            name: QualifiedName::qualified("public", "mood"),
        };
        assert_eq!(
            pick(&qualified, &[(7, 30), (8, 20)], &path, &namespaces),
            Some(7)
        );
        assert_eq!(pick(&object, &[(9, 99)], &path, &namespaces), None);
    }
}
