//! A schema dump as the files a reviewer reads: one per table (with its indexes,
//! constraints, triggers, rules, policies, statistics, comments and grants), one per
//! view, materialized view, free-standing sequence, type and function name, one per
//! schema, one for the extensions, and a manifest that includes them in dependency
//! order.
//!
//! The order: the prelude (the dump's session settings), the schemas, the extensions,
//! then every object file after every file defining a name its statements refer to
//! ([`super::references`]), ties broken by where the dump first wrote the object, so
//! the order is the dump's wherever it can be. Foreign keys of tables whose keys
//! reference each other in a cycle move to `foreign_keys.sql`, after every table; a
//! cycle left after that is an error naming its files. Default privileges come last.
//!
//! The same dump always gives the same bytes: statements are the dump's own text, in
//! the dump's order within a file, and file names are derived from the catalog names
//! alone.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use pgshift_sql::{NodeEnum, Statement};

use super::objects::{self, Aliases, Name, ObjectKey, Role, Uncovered};
use super::references::referenced;

/// Settings `pg_dump` changes between objects; each file sets what its statements
/// need and resets it at its end.
const OBJECT_SETTINGS: [(&str, &str); 2] = [
    ("default_tablespace", "SET default_tablespace = ''"),
    (
        "default_table_access_method",
        "SET default_table_access_method = heap",
    ),
];

/// The prelude's `search_path`: PostgreSQL's default instead of `pg_dump`'s empty
/// one. Every name the dump writes is qualified, so nothing it creates resolves
/// otherwise; but a SQL function whose body names something unqualified (sqlxmq's
/// `mq_uuid_exists` calls `uuid_nil()`) is inlined when an index predicate calls it,
/// and fails under an empty path: `pg_dump`'s own output of such a schema does not
/// restore.
pub const SEARCH_PATH: &str =
    "SELECT pg_catalog.set_config('search_path', '\"$user\", public', false)";

/// The manifest's file name.
pub const MANIFEST: &str = "manifest.sql";

/// One file of the layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PulledFile {
    /// Its path relative to the layout's root, `/`-separated.
    pub path: String,
    /// Its text.
    pub text: String,
    /// Statements in it.
    pub statements: usize,
}

/// The whole layout: the files in the manifest's order, and the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Every file but the manifest, in the order the manifest includes them.
    pub files: Vec<PulledFile>,
    /// The manifest's text.
    pub manifest: String,
    /// Foreign keys moved to `foreign_keys.sql` to break a cycle.
    pub moved_foreign_keys: usize,
    /// The dump as one script in its own order, with the prelude's `search_path` as
    /// the files have it: what the files are checked against.
    pub reference: String,
}

/// Why a dump has no layout.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The dump is not SQL the grammar reads.
    #[error("the schema dump does not parse: {0}")]
    Parse(String),
    /// A statement of a kind desired state does not cover.
    #[error(transparent)]
    Uncovered(#[from] Uncovered),
    /// Files that need each other.
    #[error(
        "these files refer to each other in a cycle that moving foreign keys does not \
         break: {}",
        .0.join(", ")
    )]
    Cycle(Vec<String>),
}

/// Where a file sits in the order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum FileKey {
    Prelude,
    Object(ObjectKey),
    ForeignKeys,
}

struct Entry {
    text: String,
    foreign_key: bool,
    settings: BTreeMap<&'static str, String>,
    references: BTreeSet<Name>,
}

struct Bucket {
    first: usize,
    kind: Option<objects::RelationKind>,
    entries: Vec<Entry>,
}

/// The layout of a `pg_dump --schema-only` text (its `\restrict` lines already
/// removed).
pub fn split(dump: &str) -> Result<Layout, LayoutError> {
    let statements = pgshift_sql::parse(dump).map_err(|e| LayoutError::Parse(e.to_string()))?;
    // Each statement's tree is walked once (a serialization of it).
    let references: Vec<BTreeSet<Name>> = statements.iter().map(referenced).collect();
    let mut aliases = Aliases::read(&statements);
    release_shared_sequences(&statements, &references, &mut aliases);
    let mut prelude: Vec<String> = Vec::new();
    let mut buckets: BTreeMap<ObjectKey, Bucket> = BTreeMap::new();
    let mut defined: BTreeMap<Name, ObjectKey> = BTreeMap::new();
    let mut settings: BTreeMap<&'static str, String> = OBJECT_SETTINGS
        .iter()
        .map(|(name, text)| (*name, (*text).to_owned()))
        .collect();
    let mut reference = String::new();
    for (position, statement) in statements.iter().enumerate() {
        let role = objects::role(statement, &aliases)?;
        let text = match &role {
            Role::Setting(name) if name == "search_path" => SEARCH_PATH,
            _ => statement.text.as_str(),
        };
        reference.push_str(text);
        reference.push_str(";\n");
        match role {
            Role::Setting(name) => {
                if let Some((known, _)) = OBJECT_SETTINGS.iter().find(|(n, _)| *n == name) {
                    settings.insert(known, statement.text.clone());
                } else if buckets.is_empty() {
                    prelude.push(text.to_owned());
                } else {
                    return Err(Uncovered {
                        line: statement.position.line,
                        what: format!("a SET {name} between objects"),
                    }
                    .into());
                }
            }
            Role::Part { owner, foreign_key } => {
                if let Some((name, kind)) = creates(statement) {
                    defined.insert(name, owner.clone());
                    if let Some(kind) = kind {
                        buckets
                            .entry(owner.clone())
                            .or_insert_with(|| Bucket {
                                first: position,
                                kind: None,
                                entries: Vec::new(),
                            })
                            .kind
                            .get_or_insert(kind);
                    }
                }
                let bucket = buckets.entry(owner).or_insert_with(|| Bucket {
                    first: position,
                    kind: None,
                    entries: Vec::new(),
                });
                bucket.entries.push(Entry {
                    text: statement.text.clone(),
                    foreign_key,
                    settings: settings.clone(),
                    references: references[position].clone(),
                });
            }
        }
    }
    // Names that belong to a relation (indexes, constraints, owned sequences) lead
    // to their relation's file.
    for (name, owner) in aliases.pairs() {
        defined
            .entry(name.clone())
            .or_insert_with(|| ObjectKey::Relation(owner.clone()));
    }
    let (order, moved) = order(&buckets, &defined)?;
    let mut files = Vec::new();
    let mut text = String::new();
    for statement in prelude
        .iter()
        .map(String::as_str)
        .chain(OBJECT_SETTINGS.iter().map(|(_, text)| *text))
    {
        text.push_str(statement);
        text.push_str(";\n");
    }
    files.push(PulledFile {
        path: path_of(&FileKey::Prelude, None),
        text,
        statements: prelude.len() + OBJECT_SETTINGS.len(),
    });
    let mut moved_entries: Vec<&Entry> = Vec::new();
    let mut flushed = false;
    for key in &order {
        let bucket = &buckets[key];
        if *key == ObjectKey::DefaultPrivileges {
            flush_foreign_keys(&mut files, &moved_entries);
            flushed = true;
        }
        let entries: Vec<&Entry> = bucket
            .entries
            .iter()
            .filter(|e| {
                let moves = e.foreign_key && moved.contains(key);
                if moves {
                    moved_entries.push(e);
                }
                !moves
            })
            .collect();
        files.push(PulledFile {
            path: path_of(&FileKey::Object(key.clone()), bucket.kind),
            text: render(&entries),
            statements: entries.len(),
        });
    }
    if !flushed {
        flush_foreign_keys(&mut files, &moved_entries);
    }
    let mut manifest = String::from(
        "-- The schema as `pgshift pull` read it: every file, in dependency order.\n\
         -- Run it with: psql -v ON_ERROR_STOP=1 -f manifest.sql\n",
    );
    for file in &files {
        manifest.push_str("\\ir ");
        manifest.push_str(&file.path);
        manifest.push('\n');
    }
    Ok(Layout {
        files,
        manifest,
        moved_foreign_keys: moved_entries.len(),
        reference,
    })
}

/// Owned sequences that another relation's statements name move to their own file
/// ([`Aliases::release`]).
fn release_shared_sequences(
    statements: &[Statement],
    references: &[BTreeSet<Name>],
    aliases: &mut Aliases,
) {
    let mut shared = BTreeSet::new();
    for (statement, names) in statements.iter().zip(references) {
        let Ok(Role::Part {
            owner: ObjectKey::Relation(owner),
            ..
        }) = objects::role(statement, aliases)
        else {
            continue;
        };
        for name in names {
            if aliases
                .owned_sequence(name)
                .is_some_and(|table| *table != owner && *name != owner)
            {
                shared.insert(name.clone());
            }
        }
    }
    for sequence in &shared {
        aliases.release(sequence);
    }
}

/// `foreign_keys.sql`, after every object file but the default privileges, when some
/// foreign keys moved there.
fn flush_foreign_keys(files: &mut Vec<PulledFile>, moved: &[&Entry]) {
    if !moved.is_empty() {
        files.push(PulledFile {
            path: path_of(&FileKey::ForeignKeys, None),
            text: render(moved),
            statements: moved.len(),
        });
    }
}

/// The object files in dependency order, and the files whose foreign keys had to move.
fn order(
    buckets: &BTreeMap<ObjectKey, Bucket>,
    defined: &BTreeMap<Name, ObjectKey>,
) -> Result<(Vec<ObjectKey>, BTreeSet<ObjectKey>), LayoutError> {
    let mut moved: BTreeSet<ObjectKey> = BTreeSet::new();
    loop {
        let mut needs: BTreeMap<&ObjectKey, BTreeSet<&ObjectKey>> = BTreeMap::new();
        for (key, bucket) in buckets {
            let mut set = BTreeSet::new();
            for entry in &bucket.entries {
                if entry.foreign_key && moved.contains(key) {
                    continue;
                }
                for name in &entry.references {
                    if let Some(other) = defined.get(name) {
                        if other != key && buckets.contains_key(other) {
                            set.insert(other);
                        }
                    }
                }
            }
            // Every object of a schema comes after the schema; every object after the
            // extensions; default privileges after everything.
            if let Some(schema) = schema_of(key) {
                let schema_key = ObjectKey::Schema(schema.to_owned());
                if let Some((k, _)) = buckets.get_key_value(&schema_key) {
                    set.insert(k);
                }
            }
            if !matches!(key, ObjectKey::Schema(_) | ObjectKey::Extensions) {
                if let Some((k, _)) = buckets.get_key_value(&ObjectKey::Extensions) {
                    set.insert(k);
                }
            }
            if *key == ObjectKey::DefaultPrivileges {
                set.extend(
                    buckets
                        .keys()
                        .filter(|k| **k != ObjectKey::DefaultPrivileges),
                );
            }
            if let ObjectKey::Extensions = key {
                set.extend(buckets.keys().filter(|k| matches!(k, ObjectKey::Schema(_))));
            }
            needs.insert(key, set);
        }
        let rank = |key: &ObjectKey| {
            let class = match key {
                ObjectKey::Schema(_) => 0,
                ObjectKey::Extensions => 1,
                ObjectKey::DefaultPrivileges => 3,
                _ => 2,
            };
            (class, buckets[key].first)
        };
        let mut waiting: BTreeMap<&ObjectKey, usize> =
            needs.iter().map(|(k, set)| (*k, set.len())).collect();
        let mut ready: BinaryHeap<Reverse<((u8, usize), &ObjectKey)>> = waiting
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(k, _)| Reverse((rank(k), *k)))
            .collect();
        let mut dependents: BTreeMap<&ObjectKey, Vec<&ObjectKey>> = BTreeMap::new();
        for (key, set) in &needs {
            for needed in set {
                dependents.entry(*needed).or_default().push(*key);
            }
        }
        let mut done = Vec::new();
        while let Some(Reverse((_, key))) = ready.pop() {
            done.push(key.clone());
            for other in dependents.get(key).into_iter().flatten() {
                let left = waiting.get_mut(other).expect("every key waits");
                *left -= 1;
                if *left == 0 {
                    ready.push(Reverse((rank(other), *other)));
                }
            }
        }
        if done.len() == buckets.len() {
            return Ok((done, moved));
        }
        let stuck: Vec<&ObjectKey> = waiting
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| *k)
            .collect();
        let newly: Vec<ObjectKey> = stuck
            .iter()
            .filter(|k| !moved.contains(**k))
            .filter(|k| buckets[**k].entries.iter().any(|e| e.foreign_key))
            .map(|k| (*k).clone())
            .collect();
        if newly.is_empty() {
            return Err(LayoutError::Cycle(
                stuck
                    .iter()
                    .map(|k| path_of(&FileKey::Object((*k).clone()), buckets[*k].kind))
                    .collect(),
            ));
        }
        moved.extend(newly);
    }
}

fn schema_of(key: &ObjectKey) -> Option<&str> {
    match key {
        ObjectKey::Relation((s, _)) | ObjectKey::Function((s, _)) | ObjectKey::Type((s, _)) => {
            Some(s)
        }
        _ => None,
    }
}

/// The name and folder kind a statement creates (`None` kind: not a relation).
fn creates(statement: &Statement) -> Option<(Name, Option<objects::RelationKind>)> {
    use objects::RelationKind as K;
    match &statement.node {
        NodeEnum::CreateStmt(s) => Some((objects::name_of(s.relation.as_ref()?), Some(K::Table))),
        NodeEnum::CreateForeignTableStmt(s) => Some((
            objects::name_of(s.base_stmt.as_ref()?.relation.as_ref()?),
            Some(K::Table),
        )),
        NodeEnum::ViewStmt(s) => Some((objects::name_of(s.view.as_ref()?), Some(K::View))),
        NodeEnum::CreateTableAsStmt(s) => Some((
            objects::name_of(s.into.as_ref()?.rel.as_ref()?),
            Some(K::MaterializedView),
        )),
        NodeEnum::CreateSeqStmt(s) => {
            Some((objects::name_of(s.sequence.as_ref()?), Some(K::Sequence)))
        }
        NodeEnum::CreateFunctionStmt(s) => Some((qualified_strings(&s.funcname)?, None)),
        NodeEnum::DefineStmt(s) => Some((qualified_strings(&s.defnames)?, None)),
        NodeEnum::CreateEnumStmt(s) => Some((qualified_strings(&s.type_name)?, None)),
        NodeEnum::CreateRangeStmt(s) => Some((qualified_strings(&s.type_name)?, None)),
        NodeEnum::CreateDomainStmt(s) => Some((qualified_strings(&s.domainname)?, None)),
        NodeEnum::CompositeTypeStmt(s) => Some((objects::name_of(s.typevar.as_ref()?), None)),
        _ => None,
    }
}

fn qualified_strings(nodes: &[pgshift_sql::ast::Node]) -> Option<Name> {
    objects::qualified(&crate::classify::names::strings(nodes))
}

/// A file's text: each statement after the settings it ran under, then the settings
/// put back.
fn render(entries: &[&Entry]) -> String {
    let defaults: BTreeMap<&str, &str> = OBJECT_SETTINGS.iter().copied().collect();
    let mut current: BTreeMap<&str, String> = defaults
        .iter()
        .map(|(k, v)| (*k, (*v).to_owned()))
        .collect();
    let mut text = String::new();
    for entry in entries {
        for (name, value) in &entry.settings {
            if current.get(name) != Some(value) {
                text.push_str(value);
                text.push_str(";\n\n");
                current.insert(name, value.clone());
            }
        }
        text.push_str(&entry.text);
        text.push_str(";\n\n");
    }
    for (name, value) in &current {
        if defaults.get(name).is_some_and(|d| d != value) {
            text.push_str(defaults[name]);
            text.push_str(";\n\n");
        }
    }
    if text.ends_with("\n\n") {
        text.pop();
    }
    text
}

fn path_of(key: &FileKey, kind: Option<objects::RelationKind>) -> String {
    use objects::RelationKind as K;
    match key {
        FileKey::Prelude => "prelude.sql".to_owned(),
        FileKey::ForeignKeys => "foreign_keys.sql".to_owned(),
        FileKey::Object(ObjectKey::Schema(s)) => format!("schemas/{}.sql", file_name(s)),
        FileKey::Object(ObjectKey::Extensions) => "extensions.sql".to_owned(),
        FileKey::Object(ObjectKey::DefaultPrivileges) => "default_privileges.sql".to_owned(),
        FileKey::Object(ObjectKey::Publication(name)) => {
            format!("publications/{}.sql", file_name(name))
        }
        FileKey::Object(ObjectKey::Relation((s, n))) => {
            let folder = match kind {
                Some(K::View) => "views",
                Some(K::MaterializedView) => "materialized_views",
                Some(K::Sequence) => "sequences",
                Some(K::Table) | None => "tables",
            };
            format!("{}/{folder}/{}.sql", file_name(s), file_name(n))
        }
        FileKey::Object(ObjectKey::Function((s, n))) => {
            format!("{}/functions/{}.sql", file_name(s), file_name(n))
        }
        FileKey::Object(ObjectKey::Type((s, n))) => {
            format!("{}/types/{}.sql", file_name(s), file_name(n))
        }
    }
}

/// A catalog name as a file name the same on every file system: lower-case ASCII
/// letters, digits and `_` kept, every other byte as `%XX` (so `Users` and `users`,
/// or `a/b`, never meet).
pub fn file_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('a', 'b');
SET default_tablespace = '';
CREATE TABLE app.b (id integer NOT NULL, a_id integer, m app.mood);
CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TABLE app.a (id bigint NOT NULL, b_id integer);
SET default_tablespace = fast;
CREATE TABLE app.z (id bigint NOT NULL);
SET default_tablespace = '';
CREATE VIEW app.v AS SELECT a.id FROM app.a;
ALTER TABLE ONLY app.a ADD CONSTRAINT a_pkey PRIMARY KEY (id);
ALTER TABLE ONLY app.b ADD CONSTRAINT b_pkey PRIMARY KEY (id);
CREATE TRIGGER t BEFORE UPDATE ON app.b FOR EACH ROW EXECUTE FUNCTION app.touch();
ALTER TABLE ONLY app.a ADD CONSTRAINT a_b FOREIGN KEY (b_id) REFERENCES app.b(id);
ALTER TABLE ONLY app.b ADD CONSTRAINT b_a FOREIGN KEY (a_id) REFERENCES app.a(id);
GRANT SELECT ON TABLE app.a TO reader;
";

    fn paths(layout: &Layout) -> Vec<&str> {
        layout.files.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn files_follow_what_their_statements_need_and_cyclic_keys_move_last() {
        let layout = split(DUMP).expect("splits");
        assert_eq!(
            paths(&layout),
            [
                "prelude.sql",
                "schemas/app.sql",
                "app/types/mood.sql",
                "app/functions/touch.sql",
                "app/tables/b.sql",
                "app/tables/a.sql",
                "app/tables/z.sql",
                "app/views/v.sql",
                "foreign_keys.sql",
            ]
        );
        assert_eq!(layout.moved_foreign_keys, 2);
        let b = &layout.files[4].text;
        assert!(b.contains("CREATE TRIGGER t"), "{b}");
        assert!(!b.contains("FOREIGN KEY"), "{b}");
        let z = &layout.files[6].text;
        assert!(
            z.starts_with("SET default_tablespace = fast;\n\nCREATE TABLE app.z")
                && z.ends_with("SET default_tablespace = '';\n"),
            "{z}"
        );
        assert!(layout.manifest.contains("\\ir app/tables/a.sql\n"));
        assert_eq!(split(DUMP).expect("splits again"), layout, "the same bytes");
    }

    #[test]
    fn a_foreign_key_without_a_cycle_stays_with_its_table_after_the_referenced_one() {
        let dump = "CREATE TABLE app.a (id int, b_id int);
CREATE TABLE app.b (id int);
ALTER TABLE ONLY app.b ADD CONSTRAINT b_pkey PRIMARY KEY (id);
ALTER TABLE ONLY app.a ADD CONSTRAINT a_b FOREIGN KEY (b_id) REFERENCES app.b(id);
";
        let layout = split(dump).expect("splits");
        assert_eq!(
            paths(&layout),
            ["prelude.sql", "app/tables/b.sql", "app/tables/a.sql"]
        );
        assert_eq!(layout.moved_foreign_keys, 0);
        assert!(layout.files[2].text.contains("FOREIGN KEY"));
    }

    #[test]
    fn a_cycle_no_foreign_key_breaks_is_named() {
        let dump = "CREATE FUNCTION app.f(r app.a) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE TABLE app.a (id int);
CREATE INDEX a_f ON app.a USING btree (app.f(a.*));
";
        match split(dump) {
            Err(LayoutError::Cycle(files)) => {
                assert_eq!(files, ["app/tables/a.sql", "app/functions/f.sql"]);
            }
            other => panic!("expected a cycle, got {other:?}"),
        }
    }

    #[test]
    fn a_partition_tree_is_one_file_in_the_dumps_order() {
        let dump = "CREATE TABLE app.p (id integer NOT NULL, t int) PARTITION BY RANGE (t);
CREATE SEQUENCE app.p_id_seq AS integer;
ALTER SEQUENCE app.p_id_seq OWNED BY app.p.id;
CREATE TABLE app.p_0 (id integer DEFAULT nextval('app.p_id_seq'::regclass) NOT NULL, t int);
ALTER TABLE ONLY app.p ATTACH PARTITION app.p_0 FOR VALUES FROM (0) TO (10);
ALTER TABLE ONLY app.p ALTER COLUMN id SET DEFAULT nextval('app.p_id_seq'::regclass);
ALTER TABLE ONLY app.p ADD CONSTRAINT p_pkey PRIMARY KEY (id, t);
ALTER TABLE ONLY app.p_0 ADD CONSTRAINT p_0_pkey PRIMARY KEY (id, t);
ALTER INDEX app.p_pkey ATTACH PARTITION app.p_0_pkey;
";
        let layout = split(dump).expect("splits");
        assert_eq!(paths(&layout), ["prelude.sql", "app/tables/p.sql"]);
        assert_eq!(layout.files[1].statements, 9);
    }

    #[test]
    fn a_serial_sequence_another_table_uses_gets_its_own_file() {
        let dump = "CREATE TABLE app.q (id integer DEFAULT nextval('app.p_id_seq'::regclass));
CREATE TABLE app.p (id integer NOT NULL);
CREATE SEQUENCE app.p_id_seq AS integer;
ALTER SEQUENCE app.p_id_seq OWNED BY app.p.id;
ALTER TABLE ONLY app.p ALTER COLUMN id SET DEFAULT nextval('app.p_id_seq'::regclass);
";
        let layout = split(dump).expect("no cycle");
        assert_eq!(
            paths(&layout),
            [
                "prelude.sql",
                "app/sequences/p_id_seq.sql",
                "app/tables/q.sql",
                "app/tables/p.sql"
            ]
        );
        assert!(layout.files[3].text.contains("OWNED BY app.p.id"));
    }

    #[test]
    fn file_names_never_meet() {
        assert_eq!(file_name("users"), "users");
        assert_eq!(file_name("Users"), "%55sers");
        assert_eq!(file_name("a/b"), "a%2Fb");
        assert_eq!(file_name("é"), "%C3%A9");
    }
}
