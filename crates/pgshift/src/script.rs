//! A migration file judged as a whole: which statements share a transaction, which
//! locks each transaction holds until its end, and which session settings (such as
//! `lock_timeout`) are in force at each statement.
//!
//! Migration runners commonly wrap each file in one transaction (sqlx, refinery,
//! Flyway and Rails do by default), so every lock the file takes is held until the
//! file's last statement. [`TransactionMode::File`] models that; a first-line comment
//! `-- no-transaction` (sqlx's marker) or `-- pgshift:no-transaction` switches a file to
//! [`TransactionMode::Statement`], where each statement commits on its own unless an
//! explicit `BEGIN … COMMIT` groups them.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Serialize;

use crate::catalog::volume::{live_volume, LiveVolume};
use crate::catalog::CatalogSnapshot;
use crate::classify::{classify, Classification, Context, Effect, OperationKind, WorkClass};
use crate::lock::LockMode;
use pgshift_sql::{QualifiedName, Statement};

/// How the runner executes a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransactionMode {
    /// The whole file runs in one transaction.
    File,
    /// Each statement commits on its own, except inside explicit `BEGIN … COMMIT`.
    Statement,
}

/// Comments that switch a file to [`TransactionMode::Statement`].
const NO_TRANSACTION_MARKERS: &[&str] = &["no-transaction", "pgshift:no-transaction"];

/// The transaction mode for a file: `default`, unless its first statement is preceded
/// by a no-transaction marker comment.
pub fn transaction_mode_for(statements: &[Statement], default: TransactionMode) -> TransactionMode {
    let marked = statements.first().is_some_and(|first| {
        first
            .leading_comments
            .iter()
            .any(|comment| NO_TRANSACTION_MARKERS.contains(&comment.as_str()))
    });
    if marked {
        TransactionMode::Statement
    } else {
        default
    }
}

/// One statement with its classification and what was in force when it ran.
#[derive(Clone, Debug)]
pub struct AnalyzedStatement {
    /// The parsed statement.
    pub statement: Statement,
    /// Its classification, in context.
    pub classification: Classification,
    /// The transaction it runs in, when it shares one with other statements (an index
    /// into [`Script::transactions`]); `None` in autocommit.
    pub transaction: Option<usize>,
    /// The `lock_timeout` in force (milliseconds; `None` or `Some(0)`: no timeout).
    pub lock_timeout_ms: Option<u64>,
    /// Whether `session_replication_role = replica` is in force.
    pub replica_role: bool,
    /// Relations it takes locks on that were created earlier in the same file.
    pub new_relations: Vec<QualifiedName>,
    /// The live sizes of the relations with rows of their own it locks that existed
    /// before the input (unknown offline): what a block that must stay whole is judged
    /// by.
    pub live: Vec<LiveVolume>,
}

impl AnalyzedStatement {
    /// Whether the statement takes `mode` or stronger on a relation that existed
    /// before the file ran.
    pub fn locks_existing_at_least(&self, mode: LockMode) -> bool {
        self.classification
            .locks
            .iter()
            .any(|lock| lock.mode >= mode && !self.new_relations.contains(&lock.relation))
    }
}

/// A lock held by a transaction until it ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeldLock {
    /// The relation.
    pub relation: QualifiedName,
    /// The strongest mode taken on it.
    pub mode: LockMode,
    /// The statement (index) that first took that mode.
    pub taken_at: usize,
}

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransactionEnd {
    /// `COMMIT`, or the end of a file the runner wraps.
    Commit,
    /// `ROLLBACK`.
    Rollback,
    /// Still open at the end of the file.
    Open,
}

/// A group of statements that share one transaction.
#[derive(Clone, Debug, Serialize)]
pub struct Transaction {
    /// Whether it was opened by an explicit `BEGIN` (else by the runner's wrapping).
    pub explicit: bool,
    /// Indexes of its statements (transaction control included).
    pub statements: Vec<usize>,
    /// Locks held until it ends, on relations that existed before the file.
    pub locks: Vec<HeldLock>,
    /// Statements that change data (`INSERT`, `UPDATE`, `DELETE`, `MERGE`).
    pub data_changes: Vec<usize>,
    /// Statements that change the schema of an existing table.
    pub schema_changes: Vec<usize>,
    /// How it ended.
    pub end: TransactionEnd,
}

/// A whole file, analysed.
#[derive(Clone, Debug)]
pub struct Script {
    /// The mode it was judged in.
    pub mode: TransactionMode,
    /// Its statements in order.
    pub statements: Vec<AnalyzedStatement>,
    /// Its multi-statement transactions.
    pub transactions: Vec<Transaction>,
}

/// Session state while walking a file.
struct Walk<'f> {
    /// The catalog as the statements so far leave it ([`crate::catalog::evolve`]).
    facts: Option<Cow<'f, CatalogSnapshot>>,
    mode: TransactionMode,
    open: Option<usize>,
    session_lock_timeout: Option<u64>,
    local_lock_timeout: Option<u64>,
    session_replica: bool,
    local_replica: Option<bool>,
    created: BTreeSet<QualifiedName>,
    /// Columns earlier statements add to tables ([`Context::added_columns`]).
    added_columns: BTreeSet<(QualifiedName, String)>,
    transactions: Vec<Transaction>,
}

impl Walk<'_> {
    fn begin(&mut self, explicit: bool) -> usize {
        self.transactions.push(Transaction {
            explicit,
            statements: Vec::new(),
            locks: Vec::new(),
            data_changes: Vec::new(),
            schema_changes: Vec::new(),
            end: TransactionEnd::Open,
        });
        self.open = Some(self.transactions.len() - 1);
        self.transactions.len() - 1
    }

    fn end(&mut self, end: TransactionEnd) {
        if let Some(open) = self.open.take() {
            self.transactions[open].end = end;
        }
        self.local_lock_timeout = None;
        self.local_replica = None;
    }

    fn lock_timeout(&self) -> Option<u64> {
        self.local_lock_timeout.or(self.session_lock_timeout)
    }
}

/// What is known beyond the SQL itself when analysing a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct Knowledge<'a> {
    /// Facts about the relations (live, or declared by a schema file).
    pub facts: Option<&'a CatalogSnapshot>,
    /// The target server's `server_version_num`.
    pub server_version_num: Option<i32>,
    /// Relations created before this file in the same run (they count as new).
    pub created_earlier: Option<&'a BTreeSet<QualifiedName>>,
}

impl Knowledge<'_> {
    /// Nothing beyond the SQL: the offline worst case.
    pub fn offline() -> Self {
        Knowledge::default()
    }
}

/// Analyses a file's statements in order, each classified with `knowledge` and with
/// what earlier statements of the file did: each is judged in the catalog the
/// statements before it leave.
pub fn analyze(
    statements: Vec<Statement>,
    mode: TransactionMode,
    knowledge: Knowledge<'_>,
) -> Script {
    let mut facts = knowledge.facts.map(Cow::Borrowed);
    analyze_evolving(statements, mode, knowledge, &mut facts)
}

/// [`analyze`], starting from `facts` (in place of `knowledge.facts`) and leaving in it
/// the catalog as the file leaves it, for the files after it in the same run.
pub fn analyze_evolving<'f>(
    statements: Vec<Statement>,
    mode: TransactionMode,
    knowledge: Knowledge<'_>,
    facts: &mut Option<Cow<'f, CatalogSnapshot>>,
) -> Script {
    // Columns earlier files of the input add are there when this one runs.
    let carried: BTreeSet<(QualifiedName, String)> = facts
        .as_deref()
        .map(|f| {
            f.relations
                .iter()
                .flat_map(|r| r.added_by_input.iter().map(|c| (r.name.clone(), c.clone())))
                .collect()
        })
        .unwrap_or_default();
    let mut walk = Walk {
        facts: facts.take(),
        mode,
        open: None,
        session_lock_timeout: None,
        local_lock_timeout: None,
        session_replica: false,
        local_replica: None,
        created: knowledge.created_earlier.cloned().unwrap_or_default(),
        added_columns: carried,
        transactions: Vec::new(),
    };
    if mode == TransactionMode::File && !statements.is_empty() {
        walk.begin(false);
    }
    let mut analyzed = Vec::with_capacity(statements.len());
    for (index, statement) in statements.into_iter().enumerate() {
        let context = Context {
            facts: walk.facts.as_deref(),
            server_version_num: knowledge.server_version_num,
            created_earlier: Some(&walk.created),
            in_transaction: walk.open.is_some(),
            added_columns: Some(&walk.added_columns),
        };
        let classification = classify(&statement, &context);
        let new_relations = classification
            .locks
            .iter()
            .filter(|lock| context.is_new(&lock.relation))
            .map(|lock| lock.relation.clone())
            .collect();
        let mut live: Vec<LiveVolume> = Vec::new();
        for lock in &classification.locks {
            if context.is_new(&lock.relation) || live.iter().any(|v| v.relation == lock.relation) {
                continue;
            }
            live.extend(live_volume(walk.facts.as_deref(), &lock.relation));
        }
        walk.added_columns.extend(classification.added_columns());
        // Live facts, and lint's declared ones (the earlier files and `--schema`),
        // evolve alike: a rename earlier in the file keeps the column's known type.
        if let Some(facts) = walk
            .facts
            .as_mut()
            .filter(|_| crate::catalog::evolve::may_change(&statement))
        {
            // INV: CO-12 — each statement is judged in the catalog the ones before it
            // leave: its renames, drops and type changes are applied here.
            let evolved = crate::catalog::evolve::evolve(facts.to_mut(), &statement, &walk.created);
            walk.added_columns.extend(evolved.retyped_columns);
        }
        let mut item = AnalyzedStatement {
            statement,
            classification,
            transaction: None,
            lock_timeout_ms: walk.lock_timeout(),
            replica_role: walk.local_replica.unwrap_or(walk.session_replica),
            new_relations,
            live,
        };
        apply_effects(&mut walk, &mut item, index);
        analyzed.push(item);
    }
    if walk.open.is_some() {
        let end = if walk.mode == TransactionMode::File
            && walk
                .open
                .is_some_and(|open| !walk.transactions[open].explicit)
        {
            TransactionEnd::Commit
        } else {
            TransactionEnd::Open
        };
        walk.end(end);
    }
    walk.transactions
        .retain(|transaction| transaction.statements.len() > 1 || transaction.explicit);
    renumber(&mut analyzed, &walk.transactions);
    if let Some(evolved) = walk.facts.as_mut().filter(|f| !f.is_declared()) {
        let evolved = evolved.to_mut();
        for (table, column) in &walk.added_columns {
            let index = match evolved.lookup(table) {
                crate::catalog::Lookup::Found(found) => {
                    evolved.relations.iter().position(|r| r.name == found.name)
                }
                _ => None,
            };
            if let Some(relation) = index.map(|i| &mut evolved.relations[i]) {
                if !relation.added_by_input.contains(column) {
                    relation.added_by_input.push(column.clone());
                }
            }
        }
    }
    *facts = walk.facts;
    Script {
        mode,
        statements: analyzed,
        transactions: walk.transactions,
    }
}

/// Records the statement in its transaction and applies its effects to the session.
fn apply_effects(walk: &mut Walk, item: &mut AnalyzedStatement, index: usize) {
    let effects = item.classification.effects.clone();
    let opens_explicitly = effects.first() == Some(&Effect::Begin);
    if opens_explicitly && walk.open.is_none() {
        walk.begin(true);
    } else if opens_explicitly {
        if let Some(open) = walk.open {
            walk.transactions[open].explicit = true;
        }
    }
    if let Some(open) = walk.open {
        item.transaction = Some(open);
        record_in_transaction(&mut walk.transactions[open], item, index);
    }
    for effect in effects {
        match effect {
            Effect::Begin => {
                if walk.open.is_none() {
                    walk.begin(true);
                }
            }
            Effect::Commit => walk.end(TransactionEnd::Commit),
            Effect::Rollback => walk.end(TransactionEnd::Rollback),
            Effect::SetLockTimeout { millis, local } => {
                if local {
                    if walk.open.is_some() {
                        walk.local_lock_timeout = millis;
                    }
                } else {
                    walk.session_lock_timeout = millis;
                }
            }
            Effect::SetReplicationRole { role, local } => {
                let replica = role == "replica";
                if local {
                    walk.local_replica = Some(replica);
                } else {
                    walk.session_replica = replica;
                }
            }
            Effect::ResetAll => {
                walk.session_lock_timeout = None;
                walk.session_replica = false;
            }
            Effect::Creates { relation } => {
                walk.created.insert(relation);
            }
            Effect::SetStatementTimeout { .. }
            | Effect::RunsProcedural { .. }
            | Effect::RunsGuarded { .. }
            | Effect::DefinesFunction { .. }
            | Effect::CreatesTrigger { .. }
            | Effect::SetsTriggerState { .. } => {}
        }
    }
}

fn record_in_transaction(transaction: &mut Transaction, item: &AnalyzedStatement, index: usize) {
    transaction.statements.push(index);
    let classification = &item.classification;
    let is_data_change = classification.operations.iter().any(|op| {
        matches!(
            op.kind,
            OperationKind::Insert
                | OperationKind::Update
                | OperationKind::Delete
                | OperationKind::Merge
        )
    });
    if is_data_change {
        transaction.data_changes.push(index);
    }
    let changes_existing_schema = classification.work >= WorkClass::CatalogOnly
        && !is_data_change
        && item.locks_existing_at_least(LockMode::ShareUpdateExclusive);
    if changes_existing_schema {
        transaction.schema_changes.push(index);
    }
    for lock in &classification.locks {
        if item.new_relations.contains(&lock.relation) {
            continue;
        }
        match transaction
            .locks
            .iter_mut()
            .find(|held| held.relation == lock.relation)
        {
            Some(held) if held.mode < lock.mode => {
                held.mode = lock.mode;
                held.taken_at = index;
            }
            Some(_) => {}
            None => transaction.locks.push(HeldLock {
                relation: lock.relation.clone(),
                mode: lock.mode,
                taken_at: index,
            }),
        }
    }
}

/// Points statements at the kept transactions' new indexes (single-statement
/// transactions were dropped).
fn renumber(statements: &mut [AnalyzedStatement], transactions: &[Transaction]) {
    for (index, statement) in statements.iter_mut().enumerate() {
        statement.transaction = transactions
            .iter()
            .position(|transaction| transaction.statements.contains(&index));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(text: &str, mode: TransactionMode) -> Script {
        analyze(
            pgshift_sql::parse(text).expect("valid"),
            mode,
            Knowledge::offline(),
        )
    }

    #[test]
    fn a_wrapped_file_is_one_transaction_holding_every_lock() {
        let s = script(
            "ALTER TABLE a ADD COLUMN x int;\nCREATE INDEX i ON b (y);\nUPDATE c SET z = 1;",
            TransactionMode::File,
        );
        assert_eq!(s.transactions.len(), 1);
        let t = &s.transactions[0];
        assert!(!t.explicit);
        assert_eq!(t.end, TransactionEnd::Commit);
        let modes: Vec<(String, LockMode)> = t
            .locks
            .iter()
            .map(|l| (l.relation.name.clone(), l.mode))
            .collect();
        assert_eq!(
            modes,
            vec![
                ("a".to_owned(), LockMode::AccessExclusive),
                ("b".to_owned(), LockMode::Share),
                ("c".to_owned(), LockMode::RowExclusive)
            ]
        );
        assert_eq!(t.data_changes, vec![2]);
        assert_eq!(t.schema_changes, vec![0, 1]);
    }

    #[test]
    fn statement_mode_groups_only_explicit_blocks() {
        let s = script(
            "ALTER TABLE a ADD COLUMN x int;\nBEGIN;\nALTER TABLE b ADD COLUMN y int;\nCOMMIT;\nALTER TABLE c ADD COLUMN z int;",
            TransactionMode::Statement,
        );
        assert_eq!(s.transactions.len(), 1);
        assert_eq!(s.transactions[0].statements, vec![1, 2, 3]);
        assert_eq!(s.statements[0].transaction, None);
        assert_eq!(s.statements[2].transaction, Some(0));
        assert_eq!(s.statements[4].transaction, None);
    }

    #[test]
    fn lock_timeout_is_tracked_through_session_and_local_settings() {
        let s = script(
            "SET lock_timeout = '2s';\nALTER TABLE a ADD COLUMN x int;\nBEGIN;\nSET LOCAL lock_timeout = 0;\nALTER TABLE a ADD COLUMN y int;\nCOMMIT;\nALTER TABLE a ADD COLUMN z int;",
            TransactionMode::Statement,
        );
        let timeouts: Vec<Option<u64>> = s.statements.iter().map(|s| s.lock_timeout_ms).collect();
        assert_eq!(
            timeouts,
            vec![
                None,
                Some(2000),
                Some(2000),
                Some(2000),
                Some(0),
                Some(0),
                Some(2000)
            ]
        );
    }

    #[test]
    fn relations_created_in_the_file_are_new() {
        let s = script(
            "CREATE TABLE t (a int);\nCREATE INDEX i ON t (a);\nCREATE INDEX j ON u (a);",
            TransactionMode::File,
        );
        assert_eq!(
            s.statements[1].new_relations,
            vec![QualifiedName::bare("t")]
        );
        assert!(s.statements[2].new_relations.is_empty());
        let held: Vec<&str> = s.transactions[0]
            .locks
            .iter()
            .map(|l| l.relation.name.as_str())
            .collect();
        assert_eq!(held, vec!["u"]);
    }

    #[test]
    fn create_table_if_not_exists_is_not_assumed_new_offline() {
        for create in [
            "CREATE TABLE IF NOT EXISTS t (a int)",
            "CREATE TABLE IF NOT EXISTS t AS SELECT 1 AS a",
            "CREATE SEQUENCE IF NOT EXISTS t",
        ] {
            let s = script(
                &format!("{create};\nCREATE INDEX i ON t (a);"),
                TransactionMode::File,
            );
            assert!(s.statements[1].new_relations.is_empty(), "{create}");
            let held: Vec<&str> = s.transactions[0]
                .locks
                .iter()
                .map(|l| l.relation.name.as_str())
                .collect();
            assert!(held.contains(&"t"), "{create}: {held:?}");
            assert!(s.statements[0]
                .classification
                .reasons
                .iter()
                .any(|r| r.contains("may already exist")));
        }
        // Without IF NOT EXISTS the table is new, and so it stays when a later
        // statement repeats it with IF NOT EXISTS.
        let s = script(
            "CREATE TABLE t (a int);\nCREATE TABLE IF NOT EXISTS t (a int);\nCREATE INDEX i ON t (a);",
            TransactionMode::File,
        );
        assert_eq!(
            s.statements[2].new_relations,
            vec![QualifiedName::bare("t")]
        );
    }

    #[test]
    fn no_transaction_marker_switches_mode() {
        let statements =
            pgshift_sql::parse("-- no-transaction\nCREATE INDEX CONCURRENTLY i ON t (a);")
                .expect("valid");
        assert_eq!(
            transaction_mode_for(&statements, TransactionMode::File),
            TransactionMode::Statement
        );
    }
}
