//! Planning against a live database: read the facts of every relation the input names
//! in one catalog snapshot, then judge each file with them.
//!
//! Planning is read-only: the only statements sent are catalog reads inside a
//! `REPEATABLE READ READ ONLY` transaction on a session whose budgets and
//! `search_path` were set by [`crate::connect`].

use std::collections::BTreeSet;

use thiserror::Error;

use crate::catalog::read::{read_snapshot_with, CatalogError};
use crate::catalog::CatalogSnapshot;
use crate::connect::Session;
use crate::lock::{ObjectClass, ObjectRef};
use crate::script::{analyze, transaction_mode_for, Knowledge, Script, TransactionMode};
use pgshift_sql::{QualifiedName, Statement};

/// One parsed input file to plan.
#[derive(Clone, Debug)]
pub struct PlanInput {
    /// The path as the user gave it.
    pub path: String,
    /// Its statements.
    pub statements: Vec<Statement>,
}

/// A planned file.
#[derive(Clone, Debug)]
pub struct PlannedFile {
    /// The path as the user gave it.
    pub path: String,
    /// The file judged with live facts.
    pub script: Script,
}

/// The result of planning.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The facts everything was judged with.
    pub snapshot: CatalogSnapshot,
    /// The files, in order.
    pub files: Vec<PlannedFile>,
}

impl Plan {
    /// Whether any statement would be refused.
    pub fn any_refused(&self) -> bool {
        self.files.iter().any(|file| {
            file.script
                .statements
                .iter()
                .any(|item| item.classification.route.refusal().is_some())
        })
    }
}

/// Why planning failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Reading the catalog failed.
    #[error("reading the catalog: {0}")]
    Catalog(#[from] CatalogError),
}

/// Plans `inputs` in order against the database behind `session`. Relations created
/// by earlier statements of the same run count as new (the runner applies the files
/// one after another).
pub async fn plan(
    session: &Session,
    inputs: Vec<PlanInput>,
    default_mode: TransactionMode,
) -> Result<Plan, PlanError> {
    let (names, objects) = relation_names(&inputs, default_mode);
    let snapshot = read_snapshot_with(
        session.client(),
        &names,
        &objects,
        session.user_search_path(),
    )
    .await?;
    let server_version_num = Some(snapshot.server.version_num);
    let mut created_in_run: BTreeSet<QualifiedName> = BTreeSet::new();
    let mut files = Vec::with_capacity(inputs.len());
    for input in inputs {
        let mode = transaction_mode_for(&input.statements, default_mode);
        let knowledge = Knowledge {
            facts: Some(&snapshot),
            server_version_num,
            created_earlier: Some(&created_in_run),
        };
        let script = analyze(input.statements, mode, knowledge);
        for item in &script.statements {
            created_in_run.extend(item.classification.created_relations().cloned());
        }
        files.push(PlannedFile {
            path: input.path,
            script,
        });
    }
    Ok(Plan { snapshot, files })
}

/// Every relation the inputs lock or create, as written, and every other object whose
/// related relations they lock, to look up in one go.
fn relation_names(
    inputs: &[PlanInput],
    default_mode: TransactionMode,
) -> (Vec<QualifiedName>, Vec<ObjectRef>) {
    let mut names: BTreeSet<QualifiedName> = BTreeSet::new();
    let mut objects: BTreeSet<ObjectRef> = BTreeSet::new();
    for input in inputs {
        let mode = transaction_mode_for(&input.statements, default_mode);
        let script = analyze(input.statements.clone(), mode, Knowledge::offline());
        for item in &script.statements {
            names.extend(item.classification.locks.iter().map(|l| l.relation.clone()));
            names.extend(item.classification.created_relations().cloned());
            for related in &item.classification.related_locks {
                let of = &related.related_to.of;
                if of.class == ObjectClass::Relation {
                    names.insert(of.name.clone());
                } else {
                    objects.insert(of.clone());
                }
            }
        }
    }
    (names.into_iter().collect(), objects.into_iter().collect())
}
