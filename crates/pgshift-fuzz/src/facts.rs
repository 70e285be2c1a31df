//! Synthetic catalog facts: a [`CatalogSnapshot`] for the relations a file names, with
//! every field chosen by fuzz bytes, so the classifier meets partitioned tables,
//! missing relations, odd types, triggers and keys it would otherwise only meet on a
//! live server. Values stay in the ranges the catalog reader can produce (and a few
//! edges of them: `-1` row estimates, huge sizes, unknown type names).

use std::collections::BTreeSet;

use pgshift::catalog::{
    CatalogSnapshot, ColumnFacts, ConstraintFacts, ForeignKeyFacts, IndexFacts, KeyFacts,
    PartitionFacts, Persistence, RelationFacts, RelationKind, ServerFacts, Sizes, TriggerEnabled,
    TriggerFacts,
};
use pgshift::script::{analyze, Knowledge, TransactionMode};
use pgshift_sql::{NodeRef, QualifiedName, Statement};

use crate::input::Choices;

/// At most this many names get facts (each costs bytes and time).
const MAX_NAMES: usize = 16;

/// At most this many words are collected from the SQL to name columns and objects.
const MAX_WORDS: usize = 64;

/// `(format_type, type OID, type name, typmod)` of the column types offered.
const TYPES: &[(&str, u32, &str, i32)] = &[
    ("integer", 23, "int4", -1),
    ("bigint", 20, "int8", -1),
    ("smallint", 21, "int2", -1),
    ("text", 25, "text", -1),
    ("character varying(100)", 1043, "varchar", 104),
    ("character varying", 1043, "varchar", -1),
    ("character(5)", 1042, "bpchar", 9),
    ("numeric(10,2)", 1700, "numeric", 655366),
    ("numeric", 1700, "numeric", -1),
    ("timestamp with time zone", 1184, "timestamptz", -1),
    ("timestamp without time zone", 1114, "timestamp", -1),
    ("jsonb", 3802, "jsonb", -1),
    ("uuid", 2950, "uuid", -1),
    ("boolean", 16, "bool", -1),
    ("bit varying(8)", 1562, "varbit", 8),
    ("inet", 869, "inet", -1),
    ("public.mood", 16390, "public.mood", -1),
];

/// The facts of one synthetic run: the snapshot and the server version the
/// classifier is told.
pub(crate) struct Synthetic {
    pub(crate) snapshot: CatalogSnapshot,
    pub(crate) server_version_num: Option<i32>,
}

/// Facts for the relations `statements` lock or create (found, missing or unknown, as
/// the bytes decide).
pub(crate) fn synthetic(statements: &[Statement], choices: &mut Choices<'_>) -> Synthetic {
    let names = relation_names(statements);
    let words = words(statements, &names);
    let version_num = *choices
        .pick(&[150018, 140000, 160004, 170002, 180000, 0, 90624, i32::MAX])
        .unwrap_or(&150018);
    let version_num = if choices.byte() == 255 {
        choices.int32()
    } else {
        version_num
    };
    let mut relations = Vec::new();
    let mut resolutions = Vec::new();
    for name in names.iter().take(MAX_NAMES) {
        match choices.below(8) {
            0 => {}
            1 => resolutions.push((name.clone(), None)),
            2 if !relations.is_empty() => {
                let alias = choices.below(relations.len());
                resolutions.push((name.clone(), Some(alias)));
            }
            _ => {
                let oid = 16384 + u32::try_from(relations.len()).unwrap_or(0);
                relations.push(relation(name, &words, choices, oid));
                resolutions.push((name.clone(), Some(relations.len() - 1)));
            }
        }
    }
    let server_version_num = match choices.below(3) {
        0 => Some(version_num),
        1 => None,
        _ => Some(choices.int32()),
    };
    Synthetic {
        snapshot: CatalogSnapshot {
            server: ServerFacts {
                version_num,
                version: format!("synthetic {version_num}"),
            },
            relations,
            resolutions,
            // Related objects (types, schemas, publications) are not synthesized yet.
            objects: Vec::new(),
            functions: Vec::new(),
        },
        server_version_num,
    }
}

/// Every relation the file locks or creates, as `plan` collects them, plus every
/// relation named anywhere in it.
fn relation_names(statements: &[Statement]) -> Vec<QualifiedName> {
    let mut names = BTreeSet::new();
    let script = analyze(
        statements.to_vec(),
        TransactionMode::File,
        Knowledge::offline(),
    );
    for item in &script.statements {
        names.extend(item.classification.locks.iter().map(|l| l.relation.clone()));
        names.extend(item.classification.created_relations().cloned());
    }
    for statement in statements {
        for (node, ..) in statement.node.nodes() {
            if let NodeRef::RangeVar(range_var) = node {
                let schema = Some(range_var.schemaname.clone()).filter(|s| !s.is_empty());
                names.insert(QualifiedName {
                    schema,
                    name: range_var.relname.clone(),
                });
            }
        }
    }
    names.into_iter().collect()
}

/// Words of the SQL (strings, column names), to name columns and objects with.
fn words(statements: &[Statement], names: &[QualifiedName]) -> Vec<String> {
    let mut words = BTreeSet::new();
    words.insert("id".to_owned());
    words.extend(names.iter().map(|name| name.name.clone()));
    for statement in statements {
        for (node, ..) in statement.node.nodes() {
            match node {
                NodeRef::String(s) => {
                    words.insert(s.sval.clone());
                }
                NodeRef::ColumnDef(column) => {
                    words.insert(column.colname.clone());
                }
                NodeRef::IndexElem(elem) => {
                    words.insert(elem.name.clone());
                }
                _ => {}
            }
        }
    }
    words.into_iter().take(MAX_WORDS).collect()
}

fn word(words: &[String], choices: &mut Choices<'_>) -> String {
    choices
        .pick(words)
        .cloned()
        .unwrap_or_else(|| "id".to_owned())
}

fn other_name(words: &[String], choices: &mut Choices<'_>) -> QualifiedName {
    let name = word(words, choices);
    if choices.flag() {
        QualifiedName::qualified("public", name)
    } else {
        QualifiedName::bare(name)
    }
}

fn count(choices: &mut Choices<'_>, max: usize) -> usize {
    choices.below(max + 1)
}

fn relation(
    name: &QualifiedName,
    words: &[String],
    choices: &mut Choices<'_>,
    oid: u32,
) -> RelationFacts {
    use RelationKind::*;
    let kind = *choices
        .pick(&[
            Table,
            PartitionedTable,
            Table,
            Index,
            PartitionedIndex,
            View,
            MaterializedView,
            Sequence,
            ForeignTable,
            Other,
        ])
        .unwrap_or(&Table);
    let persistence = *choices
        .pick(&[
            Persistence::Permanent,
            Persistence::Unlogged,
            Persistence::Temporary,
        ])
        .unwrap_or(&Persistence::Permanent);
    let columns: Vec<ColumnFacts> = (0..count(choices, 6))
        .map(|_| column(words, choices))
        .collect();
    let primary_key = choices.flag().then(|| KeyFacts {
        name: format!("{}_pkey", name.name),
        columns: columns
            .iter()
            .take(1 + choices.below(2))
            .map(|c| (c.name.clone(), c.type_sql.clone()))
            .collect(),
    });
    let qualified = QualifiedName::qualified(
        name.schema.clone().unwrap_or_else(|| "public".to_owned()),
        name.name.clone(),
    );
    RelationFacts {
        oid,
        name: qualified.clone(),
        kind,
        persistence,
        owner: word(words, choices),
        sizes: sizes(choices),
        row_estimate: *choices
            .pick(&[-1, 0, 1_000, 100_000_000, i64::MAX])
            .unwrap_or(&-1),
        parent: choices.flag().then(|| other_name(words, choices)),
        indexed_table: matches!(kind, Index | PartitionedIndex).then(|| other_name(words, choices)),
        partition_key: (kind == PartitionedTable).then(|| choices.text(24)),
        partitions: (0..count(choices, 3))
            .map(|i| partition(&qualified, i, choices))
            .collect(),
        columns,
        primary_key,
        indexes: (0..count(choices, 3))
            .map(|_| index(words, choices))
            .collect(),
        constraints: (0..count(choices, 4))
            .map(|_| constraint(words, choices))
            .collect(),
        triggers: (0..count(choices, 3))
            .map(|_| trigger(words, choices))
            .collect(),
        schema_constraint_names: Vec::new(),
        added_by_input: Vec::new(),
        foreign_keys_out: (0..count(choices, 2))
            .map(|_| foreign_key(&qualified, words, choices, true))
            .collect(),
        foreign_keys_in: (0..count(choices, 2))
            .map(|_| foreign_key(&qualified, words, choices, false))
            .collect(),
        dependent_views: (0..count(choices, 2))
            .map(|_| other_name(words, choices))
            .collect(),
        publications: (0..count(choices, 2))
            .map(|_| word(words, choices))
            .collect(),
        rls_enabled: choices.flag(),
        rls_forced: choices.flag(),
        replica_identity: *choices.pick(&['d', 'n', 'f', 'i', '?']).unwrap_or(&'d'),
        sizes_estimated: choices.flag(),
        // Locks held elsewhere and related relations are not synthesized yet.
        locks_elsewhere: Vec::new(),
        related: Vec::new(),
    }
}

fn sizes(choices: &mut Choices<'_>) -> Sizes {
    let mut pick = || {
        *choices
            .pick(&[0, 8_192, 10 << 20, 10 << 30, 1 << 40, i64::MAX])
            .unwrap_or(&0)
    };
    let (heap_bytes, index_bytes, toast_bytes) = (pick(), pick(), pick());
    Sizes {
        heap_bytes,
        index_bytes,
        toast_bytes,
        total_bytes: heap_bytes
            .saturating_add(index_bytes)
            .saturating_add(toast_bytes),
    }
}

fn column(words: &[String], choices: &mut Choices<'_>) -> ColumnFacts {
    let (type_sql, type_oid, type_name, typmod) = *choices.pick(TYPES).unwrap_or(&TYPES[0]);
    let (type_sql, type_name, typmod) = if choices.byte() == 255 {
        let custom = choices.text(16);
        (custom.clone(), custom, choices.int32())
    } else {
        (type_sql.to_owned(), type_name.to_owned(), typmod)
    };
    ColumnFacts {
        name: word(words, choices),
        type_sql,
        type_oid,
        type_name,
        typmod,
        not_null: choices.flag(),
        default: match choices.below(6) {
            0 => Some("0".to_owned()),
            1 => Some("now()".to_owned()),
            2 => Some("nextval('s'::regclass)".to_owned()),
            3 => Some(choices.text(24)),
            _ => None,
        },
        generated: *choices
            .pick(&[None, None, Some('s'), Some('v')])
            .unwrap_or(&None),
        identity: *choices
            .pick(&[None, None, Some('a'), Some('d')])
            .unwrap_or(&None),
        used_by_generated: if choices.below(4) == 0 {
            vec![word(words, choices)]
        } else {
            Vec::new()
        },
    }
}

fn partition(parent: &QualifiedName, index: usize, choices: &mut Choices<'_>) -> PartitionFacts {
    let is_default = choices.below(4) == 0;
    PartitionFacts {
        name: QualifiedName::qualified(
            parent.schema.clone().unwrap_or_default(),
            format!("{}_p{index}", parent.name),
        ),
        bound: if is_default {
            "DEFAULT".to_owned()
        } else {
            format!("FOR VALUES FROM ({index}) TO ({})", index + 1)
        },
        is_default,
        is_partitioned: choices.below(4) == 0,
    }
}

fn index(words: &[String], choices: &mut Choices<'_>) -> IndexFacts {
    let name = other_name(words, choices);
    IndexFacts {
        definition: format!(
            "CREATE INDEX {} ON t USING btree ({})",
            name.name,
            word(words, choices)
        ),
        name,
        is_unique: choices.flag(),
        is_primary: choices.flag(),
        is_valid: choices.below(4) != 0,
    }
}

fn constraint(words: &[String], choices: &mut Choices<'_>) -> ConstraintFacts {
    let column = word(words, choices);
    let kind = *choices
        .pick(&['c', 'f', 'p', 'u', 'x', 't', 'n'])
        .unwrap_or(&'c');
    let definition = match choices.below(4) {
        0 => format!("CHECK (({column} IS NOT NULL))"),
        1 => format!(
            "CHECK (({} IS NOT NULL))",
            pgshift_sql::quote_ident(&column)
        ),
        2 => format!("FOREIGN KEY ({column}) REFERENCES t(id)"),
        _ => choices.text(32),
    };
    ConstraintFacts {
        name: word(words, choices),
        kind,
        definition,
        validated: choices.below(4) != 0,
    }
}

fn trigger(words: &[String], choices: &mut Choices<'_>) -> TriggerFacts {
    let enabled = *choices
        .pick(&[
            TriggerEnabled::Origin,
            TriggerEnabled::Always,
            TriggerEnabled::Replica,
            TriggerEnabled::Disabled,
        ])
        .unwrap_or(&TriggerEnabled::Origin);
    let name = word(words, choices);
    TriggerFacts {
        definition: format!(
            "CREATE TRIGGER {name} BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION f()"
        ),
        name,
        enabled,
        is_constraint: choices.flag(),
        deferrable: choices.flag(),
        initially_deferred: choices.flag(),
        is_clone: choices.flag(),
    }
}

fn foreign_key(
    this: &QualifiedName,
    words: &[String],
    choices: &mut Choices<'_>,
    outgoing: bool,
) -> ForeignKeyFacts {
    let other = other_name(words, choices);
    let (referencing, referenced) = if outgoing {
        (this.clone(), other)
    } else {
        (other, this.clone())
    };
    ForeignKeyFacts {
        name: word(words, choices),
        referencing,
        referenced,
        definition: format!("FOREIGN KEY ({}) REFERENCES x(id)", word(words, choices)),
        validated: choices.below(4) != 0,
    }
}
