//! The test's own reading of the catalog (independent of `pgshift::catalog`): every
//! relation by OID, what a table's lock covers (its indexes, TOAST, sequences), its
//! descendants, and which relations stand in each role to an object.
//!
//! The database is the same for every statement (each one is rolled back), so the
//! relation map is read once and role members are cached.

use std::collections::{BTreeSet, HashMap};

use pgshift::lock::{ObjectClass, ObjectRef, Role};
use pgshift_sql::QualifiedName;
use tokio_postgres::Client;

/// One relation of the test database.
#[derive(Clone, Debug)]
pub struct Rel {
    pub schema: String,
    pub name: String,
    pub relkind: char,
    /// For an index: its table. For a TOAST table: its owner.
    pub owner: Option<u32>,
}

impl Rel {
    pub fn label(&self) -> String {
        if self.schema == "shop" {
            self.name.clone()
        } else {
            format!("{}.{}", self.schema, self.name)
        }
    }

    /// A system catalog, or the TOAST table (or index) of one.
    pub fn is_system(&self, oid: u32) -> bool {
        oid < FIRST_NORMAL_OBJECT_ID
            || matches!(self.schema.as_str(), "pg_catalog" | "information_schema")
    }
}

/// The catalog as the test sees it.
pub struct Oracle {
    pub rels: HashMap<u32, Rel>,
    children: HashMap<u32, Vec<u32>>,
    /// Relations a lock on a table covers (indexes, TOAST table and its index,
    /// sequences and composite types of its columns), by table.
    covered: HashMap<u32, Vec<u32>>,
    owned_sequences: HashMap<u32, Vec<u32>>,
    members: HashMap<(Role, ObjectRef), BTreeSet<u32>>,
    /// The schemas an unqualified name is looked up in, in order.
    pub search_path: Vec<String>,
}

/// PostgreSQL's `FirstNormalObjectId`: OIDs below it belong to the system.
const FIRST_NORMAL_OBJECT_ID: u32 = 16384;

/// The search path the corpus database's users have.
const SEARCH_PATH: [&str; 3] = ["pg_catalog", "shop", "public"];

fn err(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

impl Oracle {
    pub async fn load(client: &Client) -> Result<Oracle, String> {
        let mut rels = HashMap::new();
        for row in client
            .query(
                "SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text, \
                        coalesce(x.indrelid, t.oid) AS owner \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 LEFT JOIN pg_index x ON x.indexrelid = c.oid \
                 LEFT JOIN pg_class t ON t.reltoastrelid = c.oid AND c.relkind = 't'",
                &[],
            )
            .await
            .map_err(err)?
        {
            let relkind: String = row.get(3);
            rels.insert(
                row.get::<_, u32>(0),
                Rel {
                    schema: row.get(1),
                    name: row.get(2),
                    relkind: relkind.chars().next().unwrap_or('?'),
                    owner: row.get(4),
                },
            );
        }
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for row in client
            .query("SELECT inhparent, inhrelid FROM pg_inherits", &[])
            .await
            .map_err(err)?
        {
            children.entry(row.get(0)).or_default().push(row.get(1));
        }
        let mut covered: HashMap<u32, Vec<u32>> = HashMap::new();
        let mut owned_sequences: HashMap<u32, Vec<u32>> = HashMap::new();
        for (oid, rel) in &rels {
            if let Some(owner) = rel.owner {
                covered.entry(owner).or_default().push(*oid);
            }
        }
        // A TOAST table's index is covered by the TOAST table's owner.
        let toast_indexes: Vec<(u32, u32)> = rels
            .iter()
            .filter_map(|(oid, rel)| {
                let table = rel.owner?;
                let toast_owner = rels.get(&table).filter(|t| t.relkind == 't')?.owner?;
                Some((toast_owner, *oid))
            })
            .collect();
        for (owner, oid) in toast_indexes {
            covered.entry(owner).or_default().push(oid);
        }
        for row in client
            .query(
                "SELECT d.refobjid, d.objid, true FROM pg_depend d \
                   JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S' \
                  WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass \
                    AND d.deptype IN ('a', 'i') \
                 UNION \
                 SELECT a.attrelid, t.typrelid, false FROM pg_attribute a \
                   JOIN pg_type t ON t.oid = a.atttypid AND t.typrelid <> 0 \
                  WHERE NOT a.attisdropped AND a.attnum > 0 \
                 UNION \
                 SELECT a.adrelid, d.refobjid, false FROM pg_attrdef a \
                   JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = a.oid \
                    AND d.refclassid = 'pg_class'::regclass \
                   JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'",
                &[],
            )
            .await
            .map_err(err)?
        {
            let table: u32 = row.get(0);
            let sequence: u32 = row.get(1);
            covered.entry(table).or_default().push(sequence);
            if row.get::<_, bool>(2) {
                owned_sequences.entry(table).or_default().push(sequence);
            }
        }
        Ok(Oracle {
            rels,
            children,
            covered,
            owned_sequences,
            members: HashMap::new(),
            search_path: SEARCH_PATH.iter().map(|s| (*s).to_owned()).collect(),
        })
    }

    /// The OID a relation name denotes for the test's users.
    pub fn resolve(&self, name: &QualifiedName) -> Option<u32> {
        let schemas: Vec<&str> = match &name.schema {
            // `pg_temp` is the session's own temporary schema.
            Some(schema) if schema == "pg_temp" => self
                .search_path
                .iter()
                .map(String::as_str)
                .filter(|s| s.starts_with("pg_temp_"))
                .take(1)
                .collect(),
            Some(schema) => vec![schema.as_str()],
            None => self.search_path.iter().map(String::as_str).collect(),
        };
        schemas.iter().find_map(|schema| {
            self.rels
                .iter()
                .find(|(_, r)| r.schema == *schema && r.name == name.name)
                .map(|(oid, _)| *oid)
        })
    }

    /// Partitions and inheritance children at every level.
    pub fn descendants(&self, oid: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![oid];
        while let Some(next) = stack.pop() {
            for child in self.children.get(&next).into_iter().flatten() {
                if !out.contains(child) {
                    out.push(*child);
                    stack.push(*child);
                }
            }
        }
        out
    }

    /// What a lock on `oid` covers besides itself.
    pub fn covered(&self, oid: u32) -> &[u32] {
        self.covered.get(&oid).map_or(&[], Vec::as_slice)
    }

    /// The relations in `role` to `of`.
    pub async fn members(
        &mut self,
        client: &Client,
        role: Role,
        of: &ObjectRef,
    ) -> Result<BTreeSet<u32>, String> {
        if let Some(found) = self.members.get(&(role, of.clone())) {
            return Ok(found.clone());
        }
        let found = self.read_members(client, role, of).await?;
        self.members.insert((role, of.clone()), found.clone());
        Ok(found)
    }

    async fn read_members(
        &self,
        client: &Client,
        role: Role,
        of: &ObjectRef,
    ) -> Result<BTreeSet<u32>, String> {
        // Open-ended without facts: anything may be reached.
        if matches!(role, Role::UnknownDependents | Role::FunctionBodies) {
            return Ok(self.rels.keys().copied().collect());
        }
        let root = match of.class {
            ObjectClass::Relation => self.resolve(&of.name),
            ObjectClass::Type => {
                let name = of.name.to_string();
                client
                    .query_one("SELECT to_regtype($1)::oid", &[&name])
                    .await
                    .map_err(err)?
                    .get::<_, Option<u32>>(0)
            }
            ObjectClass::Schema => {
                one(
                    client,
                    "SELECT oid FROM pg_namespace WHERE nspname = $1",
                    &of.name.name,
                )
                .await?
            }
            ObjectClass::Publication => {
                one(
                    client,
                    "SELECT oid FROM pg_publication WHERE pubname = $1",
                    &of.name.name,
                )
                .await?
            }
            ObjectClass::Statistics => {
                one(
                    client,
                    "SELECT oid FROM pg_statistic_ext WHERE stxname = $1",
                    &of.name.name,
                )
                .await?
            }
            ObjectClass::Function | ObjectClass::Other => None,
        };
        let Some(root) = root else {
            return Ok(BTreeSet::new());
        };
        let mut with_descendants = vec![root];
        with_descendants.extend(self.descendants(root));
        let sql: &str = match role {
            Role::Parent => "SELECT inhparent FROM pg_inherits WHERE inhrelid = ANY($1)",
            Role::Descendants => return Ok(self.descendants(root).into_iter().collect()),
            Role::DefaultPartition => {
                "SELECT partdefid FROM pg_partitioned_table WHERE partrelid = ANY($1)"
            }
            Role::ReferencedTables => {
                "SELECT confrelid FROM pg_constraint WHERE contype = 'f' AND conrelid = ANY($1)"
            }
            Role::ReferencingTables => {
                "WITH RECURSIVE r(oid) AS (SELECT unnest($1::oid[]) UNION \
                   SELECT k.conrelid FROM r JOIN pg_constraint k ON k.contype = 'f' AND k.confrelid = r.oid) \
                 SELECT oid FROM r"
            }
            Role::IndexedTable => "SELECT indrelid FROM pg_index WHERE indexrelid = ANY($1)",
            Role::OwnedSequences => {
                return Ok(self
                    .owned_sequences
                    .get(&root)
                    .into_iter()
                    .flatten()
                    .copied()
                    .collect())
            }
            Role::DroppedWith | Role::CascadeDependents => CLOSURE,
            Role::TablesOfType => TYPE_USERS,
            Role::ViewBaseRelations => VIEW_BASES,
            Role::RuleRelations => {
                "SELECT d.refobjid FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass \
                   AND d.objid = r.oid AND d.refclassid = 'pg_class'::regclass WHERE r.ev_class = ANY($1)"
            }
            Role::PolicyRelations => {
                "SELECT d.refobjid FROM pg_policy p JOIN pg_depend d ON d.classid = 'pg_policy'::regclass \
                   AND d.objid = p.oid AND d.refclassid = 'pg_class'::regclass WHERE p.polrelid = ANY($1)"
            }
            Role::PublicationTables => {
                "SELECT (quote_ident(t.schemaname) || '.' || quote_ident(t.tablename))::regclass::oid \
                   FROM pg_publication_tables t JOIN pg_publication p ON p.pubname = t.pubname \
                  WHERE p.oid = ANY($1) \
                 UNION SELECT prrelid FROM pg_publication_rel WHERE prpubid = ANY($1)"
            }
            Role::SchemaRelations => "SELECT oid FROM pg_class WHERE relnamespace = ANY($1)",
            Role::StatisticsTable => "SELECT stxrelid FROM pg_statistic_ext WHERE oid = ANY($1)",
            Role::RowTypeUsers => {
                "SELECT x.indrelid FROM pg_class t JOIN pg_depend d ON d.refclassid = 'pg_type'::regclass \
                   AND d.refobjid = t.reltype JOIN pg_index x ON d.classid = 'pg_class'::regclass \
                   AND x.indexrelid = d.objid WHERE t.oid = ANY($1) \
                 UNION SELECT k.conrelid FROM pg_class t JOIN pg_depend d ON d.refclassid = 'pg_type'::regclass \
                   AND d.refobjid = t.reltype JOIN pg_constraint k ON d.classid = 'pg_constraint'::regclass \
                   AND k.oid = d.objid WHERE t.oid = ANY($1) \
                 UNION SELECT s.stxrelid FROM pg_class t JOIN pg_depend d ON d.refclassid = 'pg_type'::regclass \
                   AND d.refobjid = t.reltype JOIN pg_statistic_ext s ON d.classid = 'pg_statistic_ext'::regclass \
                   AND s.oid = d.objid WHERE t.oid = ANY($1)"
            }
            Role::UnknownDependents | Role::FunctionBodies => unreachable!("handled above"),
        };
        let roots = if matches!(
            role,
            Role::ReferencedTables | Role::ReferencingTables | Role::IndexedTable
        ) {
            with_descendants
        } else {
            vec![root]
        };
        let class = match of.class {
            ObjectClass::Relation => "pg_class",
            ObjectClass::Type => "pg_type",
            ObjectClass::Schema => "pg_namespace",
            ObjectClass::Publication => "pg_publication",
            ObjectClass::Statistics => "pg_statistic_ext",
            ObjectClass::Function | ObjectClass::Other => "pg_proc",
        };
        let rows = if sql == CLOSURE {
            client.query(sql, &[&roots, &class]).await
        } else {
            client.query(sql, &[&roots]).await
        }
        .map_err(err)?;
        Ok(rows
            .iter()
            .filter_map(|row| row.get::<_, Option<u32>>(0))
            .filter(|oid| *oid != 0)
            .collect())
    }
}

async fn one(client: &Client, sql: &str, name: &str) -> Result<Option<u32>, String> {
    Ok(client
        .query_opt(sql, &[&name])
        .await
        .map_err(err)?
        .map(|row| row.get(0)))
}

/// Everything reachable from the root through `pg_depend` (down, and up from an
/// internal part to its owner), mapped to the relations each object belongs to.
const CLOSURE: &str = "\
WITH RECURSIVE w(classid, objid) AS (
    SELECT $2::text::regclass::oid, r FROM unnest($1::oid[]) r
    UNION
    SELECT x.classid, x.objid FROM w CROSS JOIN LATERAL (
        SELECT d.classid, d.objid FROM pg_depend d
         WHERE d.refclassid = w.classid AND d.refobjid = w.objid AND d.deptype <> 'p'
        UNION ALL
        SELECT d.refclassid, d.refobjid FROM pg_depend d
         WHERE d.classid = w.classid AND d.objid = w.objid AND d.deptype IN ('i', 'P')
    ) x
)
SELECT w.objid FROM w WHERE w.classid = 'pg_class'::regclass
UNION SELECT x.indrelid FROM w JOIN pg_index x ON x.indexrelid = w.objid WHERE w.classid = 'pg_class'::regclass
UNION SELECT k.conrelid FROM w JOIN pg_constraint k ON k.oid = w.objid WHERE w.classid = 'pg_constraint'::regclass
UNION SELECT k.confrelid FROM w JOIN pg_constraint k ON k.oid = w.objid WHERE w.classid = 'pg_constraint'::regclass
UNION SELECT t.tgrelid FROM w JOIN pg_trigger t ON t.oid = w.objid WHERE w.classid = 'pg_trigger'::regclass
UNION SELECT r.ev_class FROM w JOIN pg_rewrite r ON r.oid = w.objid WHERE w.classid = 'pg_rewrite'::regclass
UNION SELECT p.polrelid FROM w JOIN pg_policy p ON p.oid = w.objid WHERE w.classid = 'pg_policy'::regclass
UNION SELECT a.adrelid FROM w JOIN pg_attrdef a ON a.oid = w.objid WHERE w.classid = 'pg_attrdef'::regclass
UNION SELECT s.stxrelid FROM w JOIN pg_statistic_ext s ON s.oid = w.objid WHERE w.classid = 'pg_statistic_ext'::regclass
UNION SELECT t.typrelid FROM w JOIN pg_type t ON t.oid = w.objid WHERE w.classid = 'pg_type'::regclass";

/// Tables using a type: through domains, arrays, ranges and composite types, and typed
/// tables; the composite type's own relation included.
const TYPE_USERS: &str = "\
WITH RECURSIVE t(typ) AS (
    SELECT unnest($1::oid[])
    UNION
    SELECT x.oid FROM t CROSS JOIN LATERAL (
        SELECT y.oid FROM pg_type y WHERE y.typbasetype = t.typ OR y.typelem = t.typ
        UNION ALL SELECT c.reltype FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                  WHERE a.atttypid = t.typ AND c.relkind = 'c'
        UNION ALL SELECT g.rngtypid FROM pg_range g WHERE g.rngsubtype = t.typ
    ) x
)
SELECT a.attrelid FROM t JOIN pg_attribute a ON a.atttypid = t.typ
UNION SELECT c.oid FROM t JOIN pg_class c ON c.reloftype = t.typ OR c.reltype = t.typ";

/// A view's base relations at every level.
const VIEW_BASES: &str = "\
WITH RECURSIVE b(oid) AS (
    SELECT unnest($1::oid[])
    UNION
    SELECT d.refobjid FROM b JOIN pg_rewrite r ON r.ev_class = b.oid
      JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
       AND d.refclassid = 'pg_class'::regclass
)
SELECT oid FROM b";
