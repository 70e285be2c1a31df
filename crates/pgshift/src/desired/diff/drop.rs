//! The statement that removes a unit the desired schema does not have.

use pgshift_sql::ast::{DropBehavior, DropStmt, Node, ObjectType, ObjectWithArgs};
use pgshift_sql::{quote_ident, NodeEnum, QualifiedName, Statement};

use super::super::units::{Key, Kind, Unit};
use super::{describe, q, settings, sql_of, unsupported, Action, Change, DiffError, Facts};

/// The statement that removes `unit`, or none where nothing is left to remove (a
/// setting of a column the desired schema does not have).
pub(super) fn drop(key: &Key, unit: &Unit, facts: &Facts) -> Result<Option<Change>, DiffError> {
    let p = &key.parts;
    let object = describe(key);
    let plain = |sql: String, destructive: bool| {
        Ok(Some(Change {
            sql,
            action: Action::Drop,
            object: object.clone(),
            destructive,
        }))
    };
    match key.kind {
        Kind::Table => plain(format!("DROP TABLE {}", q(&p[0], &p[1])), true),
        Kind::View => plain(format!("DROP VIEW {}", q(&p[0], &p[1])), true),
        Kind::MaterializedView => {
            plain(format!("DROP MATERIALIZED VIEW {}", q(&p[0], &p[1])), true)
        }
        Kind::Sequence => plain(format!("DROP SEQUENCE {}", q(&p[0], &p[1])), true),
        Kind::Type => {
            let word = if matches!(unit.statement.node, NodeEnum::CreateDomainStmt(_)) {
                "DOMAIN"
            } else {
                "TYPE"
            };
            plain(format!("DROP {word} {}", q(&p[0], &p[1])), true)
        }
        Kind::Extension => plain(format!("DROP EXTENSION {}", quote_ident(&p[0])), true),
        Kind::Schema => plain(format!("DROP SCHEMA {}", quote_ident(&p[0])), true),
        Kind::Publication => plain(format!("DROP PUBLICATION {}", quote_ident(&p[0])), false),
        Kind::PublicationMember => match &unit.statement.node {
            NodeEnum::AlterPublicationStmt(stmt)
                if stmt.action == pgshift_sql::ast::AlterPublicationAction::ApAddObjects as i32 =>
            {
                let mut dropped = stmt.clone();
                dropped.action = pgshift_sql::ast::AlterPublicationAction::ApDropObjects as i32;
                // DROP takes the tables without their row filters and column lists.
                for object in &mut dropped.pubobjects {
                    if let Some(NodeEnum::PublicationObjSpec(spec)) = &mut object.node {
                        if let Some(table) = spec.pubtable.as_mut() {
                            table.where_clause = None;
                            table.columns.clear();
                        }
                    }
                }
                plain(
                    sql_of(NodeEnum::AlterPublicationStmt(dropped), &object)?,
                    false,
                )
            }
            _ => unsupported(&object, "removing it"),
        },
        Kind::Function => plain(drop_function(&unit.statement, &object)?, true),
        Kind::Constraint => plain(
            format!(
                "ALTER TABLE {} DROP CONSTRAINT {}",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::DomainConstraint => plain(
            format!(
                "ALTER DOMAIN {} DROP CONSTRAINT {}",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::Index => plain(format!("DROP INDEX {}", q(&p[0], &p[1])), false),
        Kind::Trigger => plain(
            format!("DROP TRIGGER {} ON {}", quote_ident(&p[2]), q(&p[0], &p[1])),
            false,
        ),
        Kind::TriggerState => plain(
            format!(
                "ALTER TABLE {} ENABLE TRIGGER {}",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::Policy => plain(
            format!("DROP POLICY {} ON {}", quote_ident(&p[2]), q(&p[0], &p[1])),
            false,
        ),
        Kind::Rule => plain(
            format!("DROP RULE {} ON {}", quote_ident(&p[2]), q(&p[0], &p[1])),
            false,
        ),
        Kind::Statistics => plain(format!("DROP STATISTICS {}", q(&p[0], &p[1])), false),
        Kind::Default => plain(
            format!(
                "ALTER TABLE {} ALTER COLUMN {} DROP DEFAULT",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::Identity => plain(
            format!(
                "ALTER TABLE {} ALTER COLUMN {} DROP IDENTITY",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::SequenceOwnedBy => plain(
            format!("ALTER SEQUENCE {} OWNED BY NONE", q(&p[0], &p[1])),
            false,
        ),
        Kind::RowSecurity => plain(
            format!("ALTER TABLE {} DISABLE ROW LEVEL SECURITY", q(&p[0], &p[1])),
            false,
        ),
        Kind::ForceRowSecurity => plain(
            format!(
                "ALTER TABLE {} NO FORCE ROW LEVEL SECURITY",
                q(&p[0], &p[1])
            ),
            false,
        ),
        Kind::Comment => match &unit.statement.node {
            NodeEnum::CommentStmt(stmt) => {
                let mut cleared = stmt.clone();
                cleared.comment = String::new();
                plain(sql_of(NodeEnum::CommentStmt(cleared), &object)?, false)
            }
            _ => unsupported(&object, "removing it"),
        },
        Kind::Grant => match &unit.statement.node {
            NodeEnum::GrantStmt(stmt) => {
                let mut revoke = stmt.clone();
                revoke.is_grant = false;
                revoke.grant_option = false;
                plain(sql_of(NodeEnum::GrantStmt(revoke), &object)?, false)
            }
            _ => unsupported(&object, "revoking it"),
        },
        // Destructive: from DETACH on, the partition's rows are no longer the
        // parent's (until an ATTACH of a changed bound, later in the plan).
        Kind::Attach => {
            let Some(parent) = attached_to(&unit.statement) else {
                return unsupported(&object, "detaching it");
            };
            plain(
                format!("ALTER TABLE {parent} DETACH PARTITION {}", q(&p[0], &p[1])),
                true,
            )
        }
        Kind::TableSetting => settings::reset(key, unit, facts, &object),
        Kind::StatisticsTarget => match &unit.statement.node {
            NodeEnum::AlterStatsStmt(stmt) => {
                let mut reset = stmt.clone();
                reset.stxstattarget = Some(Box::new(Node {
                    node: Some(NodeEnum::Integer(pgshift_sql::ast::Integer { ival: -1 })),
                }));
                plain(sql_of(NodeEnum::AlterStatsStmt(reset), &object)?, false)
            }
            _ => unsupported(&object, "removing it"),
        },
        // An index partition leaves with its table (see `gone`): one whose table stays
        // attached cannot be detached alone.
        Kind::Aggregate | Kind::IndexAttach | Kind::DefaultPrivileges => {
            unsupported(&object, "removing it")
        }
    }
}

fn attached_to(statement: &Statement) -> Option<QualifiedName> {
    match &statement.node {
        NodeEnum::AlterTableStmt(stmt) => stmt.relation.as_ref().map(|rv| {
            let (s, n) = super::super::objects::name_of(rv);
            q(&s, &n)
        }),
        _ => None,
    }
}

/// `DROP FUNCTION f(types)` (or `PROCEDURE`) from the live `CREATE`'s syntax tree.
fn drop_function(statement: &Statement, object: &str) -> Result<String, DiffError> {
    let NodeEnum::CreateFunctionStmt(stmt) = &statement.node else {
        return unsupported(object, "dropping it");
    };
    let args: Vec<Node> = stmt
        .parameters
        .iter()
        .filter_map(|p| match &p.node {
            Some(NodeEnum::FunctionParameter(p))
                if p.mode != pgshift_sql::ast::FunctionParameterMode::FuncParamOut as i32
                    && p.mode != pgshift_sql::ast::FunctionParameterMode::FuncParamTable as i32 =>
            {
                p.arg_type.clone().map(|t| Node {
                    node: Some(NodeEnum::TypeName(t)),
                })
            }
            _ => None,
        })
        .collect();
    let drop = DropStmt {
        objects: vec![Node {
            node: Some(NodeEnum::ObjectWithArgs(ObjectWithArgs {
                objname: stmt.funcname.clone(),
                objargs: args,
                objfuncargs: Vec::new(),
                args_unspecified: false,
            })),
        }],
        remove_type: if stmt.is_procedure {
            ObjectType::ObjectProcedure as i32
        } else {
            ObjectType::ObjectFunction as i32
        },
        behavior: DropBehavior::DropRestrict as i32,
        missing_ok: false,
        concurrent: false,
    };
    sql_of(NodeEnum::DropStmt(drop), object)
}
