//! Desired state against PostgreSQL, on generated pairs of schemas: a seeded generator
//! writes a schema (tables with typed columns, defaults, NOT NULL, keys, checks,
//! indexes, foreign keys with their actions, comments, fillfactors, views, an enum type
//! and a sequence), a mutation of it (columns added, dropped, retyped, defaults and NOT
//! NULL changed, indexes, checks and foreign keys added, dropped and changed, comments
//! and fillfactors, tables and views added and dropped, an enum label added anywhere,
//! the sequence's increment, row triggers' events and enable states, row-level
//! security and policies; identity columns added, dropped, switched between ALWAYS
//! and BY DEFAULT and their increment changed; generated columns' expressions changed
//! (17 and later) and ended; column storage and statistics targets; a partitioned
//! table's partitions added, dropped and widened, its default partition, index and
//! columns; a domain's check, default and NOT NULL; a composite type's attributes
//! added, dropped and retyped), and the first is loaded with rows.
//! `pgshift apply --desired` of the second must then leave `diff` with nothing, the
//! `app` schema must dump exactly as the second run natively on an empty database,
//! and every row of every table kept must still be there.
//!
//! `PGSHIFT_DESIRED_PAIRS` pairs (6 by default, a CI draw; hundreds in a long run)
//! from `PGSHIFT_DESIRED_SEED` (the day's number by default, printed, so a failure is
//! replayed by setting it). `PGSHIFT_DESIRED_SHOW=1` prints each pair.

mod common;

use std::fmt::Write as _;
use std::fs;

use common::schema::{cluster, dump_with, pgshift_json, scratch};

/// A small deterministic generator (xorshift64*), so a seed replays a pair exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Column types: name, the value of row `g`, a default, whether a unique index and a
/// check may use it, and the type it may be changed to with every value kept.
const TYPES: [(&str, &str, &str, bool, Option<&str>); 6] = [
    ("integer", "g", "0", true, Some("bigint")),
    ("bigint", "g * 1000", "0", true, None),
    (
        "text",
        "'v' || g",
        "'x'",
        true,
        Some("character varying(200)"),
    ),
    (
        "character varying(40)",
        "'w' || g",
        "'y'",
        true,
        Some("text"),
    ),
    ("boolean", "g % 2 = 0", "false", false, None),
    (
        "numeric(12,2)",
        "g * 1.5",
        "0",
        false,
        Some("numeric(14,2)"),
    ),
];

/// Trigger events and enable states (empty: the default, ORIGIN).
const EVENTS: [&str; 3] = ["UPDATE", "INSERT OR UPDATE", "DELETE"];
const STATES: [&str; 4] = ["", "DISABLE", "ENABLE ALWAYS", "ENABLE REPLICA"];

/// Foreign-key actions the generator draws.
const ACTIONS: [&str; 4] = ["NO ACTION", "CASCADE", "SET NULL", "RESTRICT"];

#[derive(Clone, Debug)]
struct Column {
    name: String,
    /// The table whose key it references (its values are then that key's).
    references: Option<String>,
    ty: usize,
    retyped: Option<&'static str>,
    not_null: bool,
    default: bool,
    /// `GENERATED ALWAYS AS (id * k) STORED`: k.
    generated: Option<u64>,
    /// `SET STORAGE` (text columns).
    storage: Option<&'static str>,
    /// `SET STATISTICS`.
    statistics: Option<u32>,
}

/// The partitioned table `app.ev`, ranged on `t`: its partitions (name, from, to),
/// its default partition, the text columns added to it, and whether `note` is
/// indexed. Rows go to the first two partitions only; the others stay empty, so a
/// bound can change and a partition be added next to the default one online.
#[derive(Clone, Debug)]
struct Events {
    partitions: Vec<(String, i64, i64)>,
    default: Option<String>,
    extra: Vec<String>,
    indexed: bool,
}

#[derive(Clone, Debug)]
struct Index {
    name: String,
    column: String,
    unique: bool,
    desc: bool,
}

#[derive(Clone, Debug)]
struct Table {
    name: String,
    columns: Vec<Column>,
    indexes: Vec<Index>,
    checks: Vec<(String, String)>,
    comment: Option<String>,
    fillfactor: Option<u64>,
    /// Foreign keys: name, column, referenced table (always an earlier one), action.
    fks: Vec<(String, String, String, &'static str)>,
    /// A row trigger calling `app.touch()`: its events and enable state.
    trigger: Option<(&'static str, &'static str)>,
    /// Row-level security and its policies (name, expression).
    rls: bool,
    policies: Vec<(String, String)>,
    /// `id` as an identity column: ALWAYS (else BY DEFAULT), and its increment.
    identity: Option<(bool, u64)>,
}

#[derive(Clone, Debug)]
struct View {
    name: String,
    table: String,
    columns: Vec<String>,
}

#[derive(Clone, Debug)]
struct Model {
    tables: Vec<Table>,
    views: Vec<View>,
    next: usize,
    /// The labels of the enum type `app.mood`.
    labels: Vec<String>,
    /// The increment of the sequence `app.counter`.
    increment: u64,
    events: Option<Events>,
    /// The domain `app.amount`: its check's lower bound, default, NOT NULL.
    domain: (i64, Option<i64>, bool),
    /// The composite type `app.pair`'s attributes (name, type).
    pair: Vec<(String, &'static str)>,
    /// The server's major version (a generation expression changes in place from 17).
    major: u32,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            tables: Vec::new(),
            views: Vec::new(),
            next: 0,
            labels: vec!["low".to_owned(), "high".to_owned()],
            increment: 1,
            events: None,
            domain: (0, None, false),
            pair: vec![("a".to_owned(), "integer"), ("b".to_owned(), "text")],
            major: 0,
        }
    }
}

impl Column {
    fn type_name(&self) -> &'static str {
        self.retyped.unwrap_or(TYPES[self.ty].0)
    }
}

impl Model {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn generate(rng: &mut Rng, major: u32) -> Model {
        let mut model = Model {
            major,
            ..Model::default()
        };
        if rng.chance(50) {
            model.events = Some(Events {
                partitions: vec![("ev_0".to_owned(), 0, 10), ("ev_1".to_owned(), 10, 20)],
                default: rng.chance(40).then(|| "ev_default".to_owned()),
                extra: Vec::new(),
                indexed: rng.chance(50),
            });
        }
        for _ in 0..2 + rng.below(3) {
            model.add_table(rng);
        }
        if rng.chance(70) {
            model.add_view(rng);
        }
        model
    }

    fn add_table(&mut self, rng: &mut Rng) {
        let name = self.fresh("t");
        let mut table = Table {
            name,
            columns: Vec::new(),
            indexes: Vec::new(),
            checks: Vec::new(),
            comment: rng
                .chance(30)
                .then(|| format!("table note {}", rng.below(100))),
            fillfactor: rng.chance(30).then(|| 50 + rng.below(50) as u64),
            fks: Vec::new(),
            trigger: rng.chance(30).then(|| {
                (
                    EVENTS[rng.below(EVENTS.len())],
                    STATES[rng.below(STATES.len())],
                )
            }),
            rls: false,
            policies: Vec::new(),
            identity: rng
                .chance(30)
                .then(|| (rng.chance(50), 1 + rng.below(3) as u64)),
        };
        for _ in 0..1 + rng.below(4) {
            let column = self.column(rng);
            table.columns.push(column);
        }
        for _ in 0..rng.below(3) {
            self.add_index(&mut table, rng);
        }
        if rng.chance(40) {
            self.add_check(&mut table, rng);
        }
        if rng.chance(50) {
            self.add_fk(&mut table, rng);
        }
        self.tables.push(table);
    }

    /// A nullable column referencing an earlier table's key, with a random action.
    fn add_fk(&mut self, table: &mut Table, rng: &mut Rng) -> bool {
        let Some(target) = self
            .tables
            .iter()
            .map(|t| t.name.clone())
            .take_while(|n| *n != table.name)
            .nth(rng.below(self.tables.len()))
        else {
            return false;
        };
        let column = self.fresh("r");
        table.columns.push(Column {
            name: column.clone(),
            references: Some(target.clone()),
            ty: 1,
            retyped: None,
            not_null: false,
            default: false,
            generated: None,
            storage: None,
            statistics: None,
        });
        let name = self.fresh(&format!("{}_f", table.name));
        table
            .fks
            .push((name, column, target, ACTIONS[rng.below(ACTIONS.len())]));
        true
    }

    fn column(&mut self, rng: &mut Rng) -> Column {
        let name = self.fresh("c");
        if rng.chance(15) {
            return Column {
                name,
                references: None,
                ty: 1,
                retyped: None,
                not_null: false,
                default: false,
                generated: Some(2 + rng.below(5) as u64),
                storage: None,
                statistics: None,
            };
        }
        let default = rng.chance(50);
        let ty = rng.below(TYPES.len());
        Column {
            name,
            references: None,
            ty,
            retyped: None,
            not_null: default && rng.chance(60),
            default,
            generated: None,
            storage: (TYPES[ty].0 == "text" && rng.chance(40)).then_some("external"),
            statistics: rng.chance(15).then(|| 100 + rng.below(900) as u32),
        }
    }

    fn add_index(&mut self, table: &mut Table, rng: &mut Rng) {
        let usable: Vec<&Column> = table.columns.iter().filter(|c| TYPES[c.ty].3).collect();
        if usable.is_empty() {
            return;
        }
        let column = usable[rng.below(usable.len())].name.clone();
        let name = self.fresh(&format!("{}_i", table.name));
        table.indexes.push(Index {
            name,
            column,
            unique: rng.chance(40),
            desc: rng.chance(40),
        });
    }

    fn add_check(&mut self, table: &mut Table, rng: &mut Rng) {
        let usable: Vec<&Column> = table.columns.iter().filter(|c| TYPES[c.ty].3).collect();
        if usable.is_empty() {
            return;
        }
        let column = usable[rng.below(usable.len())];
        let expression = match column.type_name() {
            "integer" | "bigint" => format!("{} >= 0", column.name),
            _ => format!("length({}) < 100", column.name),
        };
        let name = self.fresh(&format!("{}_k", table.name));
        table.checks.push((name, expression));
    }

    fn add_view(&mut self, rng: &mut Rng) {
        let table = &self.tables[rng.below(self.tables.len())];
        let mut columns = vec!["id".to_owned()];
        if let Some(column) = table.columns.first() {
            columns.push(column.name.clone());
        }
        let (table, name) = (table.name.clone(), self.fresh("v"));
        self.views.push(View {
            name,
            table,
            columns,
        });
    }

    /// Whether a view reads `column` of `table` (PostgreSQL then refuses to drop or
    /// retype it; the generator does not ask for that).
    fn viewed(&self, table: &str, column: &str) -> bool {
        self.views
            .iter()
            .any(|v| v.table == table && v.columns.iter().any(|c| c == column))
    }

    /// One random mutation; returns what it did.
    fn mutate(&mut self, rng: &mut Rng) -> String {
        for _ in 0..20 {
            let t = rng.below(self.tables.len());
            // One draw in four goes to the partitioned table or a column's identity,
            // generation, storage or statistics (fewer kinds, drawn as often).
            let kind = if rng.chance(25) {
                22 + rng.below(10)
            } else {
                rng.below(33)
            };
            let table_name = self.tables[t].name.clone();
            let done = match kind {
                0 => {
                    let mut column = self.column(rng);
                    // A column added to a table with rows is NOT NULL only with a default.
                    column.not_null &= column.default;
                    let name = column.name.clone();
                    self.tables[t].columns.push(column);
                    Some(format!("add column {table_name}.{name}"))
                }
                1 => {
                    let candidates: Vec<String> = self.tables[t]
                        .columns
                        .iter()
                        .map(|c| c.name.clone())
                        .filter(|c| !self.viewed(&table_name, c))
                        .collect();
                    candidates.first().cloned().map(|column| {
                        let table = &mut self.tables[t];
                        table.columns.retain(|c| c.name != column);
                        table.indexes.retain(|i| i.column != column);
                        table.checks.retain(|(_, e)| !e.contains(&column));
                        table.fks.retain(|fk| fk.1 != column);
                        format!("drop column {table_name}.{column}")
                    })
                }
                2 => {
                    let viewed: Vec<bool> = self.tables[t]
                        .columns
                        .iter()
                        .map(|c| self.viewed(&table_name, &c.name))
                        .collect();
                    let table = &mut self.tables[t];
                    let position = table.columns.iter().zip(&viewed).position(|(c, v)| {
                        !v && c.retyped.is_none()
                            && c.generated.is_none()
                            && TYPES[c.ty].4.is_some()
                    });
                    position.map(|p| {
                        let column = &mut table.columns[p];
                        column.retyped = TYPES[column.ty].4;
                        format!("retype {table_name}.{}", column.name)
                    })
                }
                3 => {
                    let table = &mut self.tables[t];
                    table.columns.first_mut().map(|c| {
                        c.not_null = !c.not_null;
                        format!("toggle NOT NULL of {table_name}.{}", c.name)
                    })
                }
                4 => {
                    let table = &mut self.tables[t];
                    table
                        .columns
                        .last_mut()
                        // A key column's default would reference no row.
                        .filter(|c| c.generated.is_none() && c.references.is_none())
                        .map(|c| {
                            c.default = !c.default;
                            if !c.default {
                                c.not_null = false;
                            }
                            format!("toggle the default of {table_name}.{}", c.name)
                        })
                }
                5 => {
                    let mut table = self.tables[t].clone();
                    let before = table.indexes.len();
                    self.add_index(&mut table, rng);
                    let added = table.indexes.len() > before;
                    self.tables[t] = table;
                    added.then(|| format!("add an index on {table_name}"))
                }
                6 => self.tables[t]
                    .indexes
                    .pop()
                    .map(|i| format!("drop index {}", i.name)),
                7 => self.tables[t].indexes.first_mut().map(|i| {
                    i.desc = !i.desc;
                    format!("flip the order of index {}", i.name)
                }),
                8 => {
                    let mut table = self.tables[t].clone();
                    let before = table.checks.len();
                    self.add_check(&mut table, rng);
                    let added = table.checks.len() > before;
                    self.tables[t] = table;
                    added.then(|| format!("add a check on {table_name}"))
                }
                9 => self.tables[t]
                    .checks
                    .pop()
                    .map(|(n, _)| format!("drop check {n}")),
                10 => {
                    let table = &mut self.tables[t];
                    table.comment = match table.comment.take() {
                        Some(_) if rng.chance(50) => None,
                        _ => Some(format!("changed note {}", rng.below(100))),
                    };
                    Some(format!("change the comment of {table_name}"))
                }
                11 => {
                    if rng.chance(50) || self.tables.len() < 2 {
                        self.add_table(rng);
                        Some("add a table".to_owned())
                    } else {
                        let unviewed = self.tables.iter().position(|t| {
                            !self.views.iter().any(|v| v.table == t.name)
                                && !self
                                    .tables
                                    .iter()
                                    .any(|o| o.fks.iter().any(|fk| fk.2 == t.name))
                        });
                        unviewed.map(|p| {
                            let gone = self.tables.remove(p);
                            format!("drop table {}", gone.name)
                        })
                    }
                }
                13 => {
                    let table = &mut self.tables[t];
                    table.fillfactor = match table.fillfactor {
                        Some(_) if rng.chance(50) => None,
                        _ => Some(50 + rng.below(50) as u64),
                    };
                    Some(format!("change the fillfactor of {table_name}"))
                }
                14 => {
                    let label = self.fresh("label");
                    let at = rng.below(self.labels.len() + 1);
                    self.labels.insert(at, label.clone());
                    Some(format!("add enum label {label}"))
                }
                15 => {
                    self.increment += 1 + rng.below(5) as u64;
                    Some("change the sequence's increment".to_owned())
                }
                16 => {
                    let mut table = self.tables[t].clone();
                    let added = self.add_fk(&mut table, rng);
                    self.tables[t] = table;
                    added.then(|| format!("add a foreign key to {table_name}"))
                }
                17 => self.tables[t]
                    .fks
                    .pop()
                    .map(|(name, ..)| format!("drop foreign key {name}")),
                18 => self.tables[t].fks.first_mut().map(|fk| {
                    fk.3 = ACTIONS[(ACTIONS.iter().position(|a| *a == fk.3).unwrap_or(0) + 1)
                        % ACTIONS.len()];
                    format!("change the action of foreign key {}", fk.0)
                }),
                19 => {
                    let table = &mut self.tables[t];
                    table.trigger = match table.trigger {
                        Some(_) if rng.chance(40) => None,
                        _ => Some((
                            EVENTS[rng.below(EVENTS.len())],
                            STATES[rng.below(STATES.len())],
                        )),
                    };
                    Some(format!("change the trigger of {table_name}"))
                }
                20 => {
                    let table = &mut self.tables[t];
                    table.rls = !table.rls;
                    Some(format!("toggle row level security of {table_name}"))
                }
                21 => {
                    let name = self.fresh("p");
                    let table = &mut self.tables[t];
                    if table.policies.is_empty() || rng.chance(50) {
                        let bound = rng.below(10);
                        table.policies.push((name, format!("id > {bound}")));
                        Some(format!("add a policy to {table_name}"))
                    } else {
                        table
                            .policies
                            .pop()
                            .map(|(p, _)| format!("drop policy {p}"))
                    }
                }
                22..=31 => self.mutate_more(kind, t, rng),
                _ => {
                    if self.views.is_empty() || rng.chance(40) {
                        self.add_view(rng);
                        Some("add a view".to_owned())
                    } else {
                        let gone = self.views.remove(rng.below(self.views.len()));
                        Some(format!("drop view {}", gone.name))
                    }
                }
            };
            if let Some(done) = done {
                return done;
            }
        }
        "nothing".to_owned()
    }

    /// The mutations of column properties, identity and the partitioned table.
    fn mutate_more(&mut self, kind: usize, t: usize, rng: &mut Rng) -> Option<String> {
        let table_name = self.tables[t].name.clone();
        let major = self.major;
        let table = &mut self.tables[t];
        match kind {
            22 => {
                table.identity = match table.identity {
                    None => Some((rng.chance(50), 1)),
                    Some(_) if rng.chance(30) => None,
                    Some((always, increment)) if rng.chance(50) => Some((!always, increment)),
                    Some((always, increment)) => Some((always, increment + 1)),
                };
                Some(format!("change the identity of {table_name}.id"))
            }
            23 => table
                .columns
                .iter_mut()
                .find(|c| c.generated.is_some() && major >= 17)
                .map(|c| {
                    c.generated = c.generated.map(|k| k + 1);
                    format!("change the generation of {table_name}.{}", c.name)
                }),
            24 => table
                .columns
                .iter_mut()
                .find(|c| c.generated.is_some())
                .map(|c| {
                    c.generated = None;
                    format!("end the generation of {table_name}.{}", c.name)
                }),
            25 => table
                .columns
                .iter_mut()
                .find(|c| c.type_name() == "text")
                .map(|c| {
                    c.storage = match c.storage {
                        None => Some("main"),
                        Some("main") => Some("external"),
                        Some(_) => None,
                    };
                    format!("change the storage of {table_name}.{}", c.name)
                }),
            26 => table.columns.first_mut().map(|c| {
                c.statistics = match c.statistics {
                    None => Some(250),
                    Some(_) if rng.chance(50) => None,
                    Some(n) => Some(n + 50),
                };
                format!("change the statistics target of {table_name}.{}", c.name)
            }),
            30 => {
                let domain = &mut self.domain;
                match rng.below(3) {
                    0 => domain.0 += 1 + rng.below(3) as i64,
                    1 => domain.1 = domain.1.map_or(Some(5), |_| None),
                    _ => domain.2 = !domain.2,
                }
                Some("change the domain".to_owned())
            }
            31 => {
                let attribute = self.fresh("x");
                match rng.below(3) {
                    0 => self.pair.push((attribute.clone(), "date")),
                    1 if self.pair.len() > 1 => {
                        let gone = self.pair.remove(1 + rng.below(self.pair.len() - 1));
                        return Some(format!("drop attribute pair.{}", gone.0));
                    }
                    _ => {
                        let first = &mut self.pair[0];
                        first.1 = if first.1 == "integer" {
                            "bigint"
                        } else {
                            "integer"
                        };
                        return Some("retype attribute pair.a".to_owned());
                    }
                }
                Some(format!("add attribute pair.{attribute}"))
            }
            _ => self.mutate_events(kind, rng),
        }
    }

    fn mutate_events(&mut self, kind: usize, rng: &mut Rng) -> Option<String> {
        let fresh = self.fresh("ev_");
        let extra = self.fresh("e");
        let events = self.events.as_mut()?;
        let last_to = events.partitions.iter().map(|p| p.2).max().unwrap_or(0);
        match (kind, rng.below(5)) {
            (27, 0) => {
                events
                    .partitions
                    .push((fresh.clone(), last_to, last_to + 10));
                Some(format!("add partition {fresh}"))
            }
            (27, 1) if events.partitions.len() > 2 => events
                .partitions
                .pop()
                .map(|(name, ..)| format!("drop partition {name}")),
            (27, _) => {
                // An empty partition's bound: the last one, so ranges never overlap.
                let last = events.partitions.len() - 1;
                (last >= 2).then(|| {
                    events.partitions[last].2 += 5;
                    format!("widen partition {}", events.partitions[last].0)
                })
            }
            (28, 0 | 1) => {
                events.default = match events.default.take() {
                    Some(_) => None,
                    None => Some("ev_default".to_owned()),
                };
                Some("toggle the default partition".to_owned())
            }
            (28, _) => {
                events.indexed = !events.indexed;
                Some("toggle the index of ev.note".to_owned())
            }
            _ => {
                events.extra.push(extra.clone());
                Some(format!("add column ev.{extra}"))
            }
        }
    }

    fn sql(&self) -> String {
        let mut out = String::from("CREATE SCHEMA app;\n");
        let labels: Vec<String> = self.labels.iter().map(|l| format!("'{l}'")).collect();
        let _ = writeln!(out, "CREATE TYPE app.mood AS ENUM ({});", labels.join(", "));
        let _ = writeln!(
            out,
            "CREATE SEQUENCE app.counter INCREMENT BY {};",
            self.increment
        );
        out.push_str(
            "CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql \
             AS $$BEGIN RETURN NEW; END$$;\n",
        );
        let (bound, default, not_null) = self.domain;
        let _ = writeln!(
            out,
            "CREATE DOMAIN app.amount AS integer{}{} CONSTRAINT amount_floor CHECK (VALUE >= {bound});",
            default.map(|d| format!(" DEFAULT {d}")).unwrap_or_default(),
            if not_null { " NOT NULL" } else { "" }
        );
        let attributes: Vec<String> = self.pair.iter().map(|(n, t)| format!("{n} {t}")).collect();
        let _ = writeln!(out, "CREATE TYPE app.pair AS ({});", attributes.join(", "));
        for table in &self.tables {
            let mut lines = vec!["    id bigint NOT NULL".to_owned()];
            for c in &table.columns {
                let mut line = format!("    {} {}", c.name, c.type_name());
                if let Some(k) = c.generated {
                    let _ = write!(line, " GENERATED ALWAYS AS (id * {k}) STORED");
                }
                if c.default {
                    let _ = write!(line, " DEFAULT {}", TYPES[c.ty].2);
                }
                if c.not_null {
                    line.push_str(" NOT NULL");
                }
                lines.push(line);
            }
            for (name, expression) in &table.checks {
                lines.push(format!("    CONSTRAINT {name} CHECK ({expression})"));
            }
            let _ = writeln!(
                out,
                "CREATE TABLE app.{} (\n{}\n){};",
                table.name,
                lines.join(",\n"),
                table
                    .fillfactor
                    .map(|f| format!(" WITH (fillfactor = {f})"))
                    .unwrap_or_default()
            );
            let _ = writeln!(
                out,
                "ALTER TABLE app.{0} ADD CONSTRAINT {0}_pkey PRIMARY KEY (id);",
                table.name
            );
            if let Some((always, increment)) = table.identity {
                let _ = writeln!(
                    out,
                    "ALTER TABLE app.{} ALTER COLUMN id ADD GENERATED {} AS IDENTITY \
                     (INCREMENT BY {increment});",
                    table.name,
                    if always { "ALWAYS" } else { "BY DEFAULT" }
                );
            }
            for c in &table.columns {
                if let Some(storage) = c.storage {
                    let _ = writeln!(
                        out,
                        "ALTER TABLE app.{} ALTER COLUMN {} SET STORAGE {storage};",
                        table.name, c.name
                    );
                }
                if let Some(n) = c.statistics {
                    let _ = writeln!(
                        out,
                        "ALTER TABLE app.{} ALTER COLUMN {} SET STATISTICS {n};",
                        table.name, c.name
                    );
                }
            }
            for index in &table.indexes {
                let _ = writeln!(
                    out,
                    "CREATE {}INDEX {} ON app.{} ({}{});",
                    if index.unique { "UNIQUE " } else { "" },
                    index.name,
                    table.name,
                    index.column,
                    if index.desc { " DESC" } else { "" }
                );
            }
            if let Some(comment) = &table.comment {
                let _ = writeln!(out, "COMMENT ON TABLE app.{} IS '{comment}';", table.name);
            }
        }
        for table in &self.tables {
            if let Some((events, state)) = table.trigger {
                let _ = writeln!(
                    out,
                    "CREATE TRIGGER {0}_touch BEFORE {events} ON app.{0} FOR EACH ROW \
                     EXECUTE FUNCTION app.touch();",
                    table.name
                );
                if !state.is_empty() {
                    let _ = writeln!(
                        out,
                        "ALTER TABLE app.{} {state} TRIGGER {}_touch;",
                        table.name, table.name
                    );
                }
            }
            if table.rls {
                let _ = writeln!(
                    out,
                    "ALTER TABLE app.{} ENABLE ROW LEVEL SECURITY;",
                    table.name
                );
            }
            for (name, expression) in &table.policies {
                let _ = writeln!(
                    out,
                    "CREATE POLICY {name} ON app.{} USING ({expression});",
                    table.name
                );
            }
            for (name, column, target, action) in &table.fks {
                let _ = writeln!(
                    out,
                    "ALTER TABLE app.{} ADD CONSTRAINT {name} FOREIGN KEY ({column}) \
                     REFERENCES app.{target} (id) ON DELETE {action};",
                    table.name
                );
            }
        }
        if let Some(events) = &self.events {
            let extra: String = events.extra.iter().map(|e| format!(", {e} text")).collect();
            let _ = writeln!(
                out,
                "CREATE TABLE app.ev (id bigint NOT NULL, t integer NOT NULL, note text{extra}) \
                 PARTITION BY RANGE (t);\n\
                 ALTER TABLE app.ev ADD CONSTRAINT ev_pkey PRIMARY KEY (id, t);"
            );
            if events.indexed {
                out.push_str("CREATE INDEX ev_note ON app.ev (note);\n");
            }
            for (name, from, to) in &events.partitions {
                let _ = writeln!(
                    out,
                    "CREATE TABLE app.{name} PARTITION OF app.ev FOR VALUES FROM ({from}) TO ({to});"
                );
            }
            if let Some(name) = &events.default {
                let _ = writeln!(out, "CREATE TABLE app.{name} PARTITION OF app.ev DEFAULT;");
            }
        }
        for view in &self.views {
            let _ = writeln!(
                out,
                "CREATE VIEW app.{} AS SELECT {} FROM app.{};",
                view.name,
                view.columns.join(", "),
                view.table
            );
        }
        out
    }

    /// Twenty rows in every table, every column set.
    fn rows(&self) -> String {
        let mut out = String::new();
        for table in &self.tables {
            let mut names = vec!["id".to_owned()];
            let mut values = vec!["g".to_owned()];
            for c in table.columns.iter().filter(|c| c.generated.is_none()) {
                names.push(c.name.clone());
                values.push(if c.references.is_some() {
                    "g".to_owned()
                } else {
                    TYPES[c.ty].1.to_owned()
                });
            }
            let _ = writeln!(
                out,
                "INSERT INTO app.{} ({}) {}SELECT {} FROM generate_series(1, 20) g;",
                table.name,
                names.join(", "),
                if table.identity.is_some_and(|(always, _)| always) {
                    "OVERRIDING SYSTEM VALUE "
                } else {
                    ""
                },
                values.join(", ")
            );
        }
        if self.events.is_some() {
            out.push_str(
                "INSERT INTO app.ev (id, t, note) SELECT g, g % 20, 'n' || g \
                 FROM generate_series(1, 20) g;\n",
            );
        }
        out
    }
}

fn count(db: &str, table: &str) -> String {
    cluster()
        .psql(db, &format!("SELECT count(*) FROM app.{table};"))
        .expect("counted")
        .trim()
        .to_owned()
}

fn seed() -> u64 {
    std::env::var("PGSHIFT_DESIRED_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let days = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() / 86_400);
            days * 7919 + 1
        })
}

#[test]
fn generated_pairs_converge_through_apply_desired_with_every_row_kept() {
    let pairs: u64 = std::env::var("PGSHIFT_DESIRED_PAIRS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let first_seed = seed();
    eprintln!("desired pairs: PGSHIFT_DESIRED_SEED={first_seed}, {pairs} pairs");
    let work = scratch("desired-pairs");
    let mut tally: std::collections::BTreeMap<String, usize> = Default::default();
    let probe = cluster().fresh_database("pairs_probe").expect("database");
    let major: u32 = cluster()
        .psql(&probe, "SHOW server_version_num;")
        .expect("version")
        .trim()
        .parse::<u32>()
        .expect("a number")
        / 10_000;
    for pair in 0..pairs {
        let seed = first_seed.wrapping_add(pair).max(1);
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let first = Model::generate(&mut rng, major);
        let mut second = first.clone();
        let mutations: Vec<String> = (0..1 + rng.below(3))
            .map(|_| second.mutate(&mut rng))
            .collect();
        for mutation in &mutations {
            // The mutation's kind: its words without the names it drew.
            let kind: Vec<&str> = mutation
                .split(' ')
                .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
                .collect();
            *tally.entry(kind.join(" ")).or_default() += 1;
        }
        let context = format!(
            "seed {seed}: {mutations:?}\n-- first\n{}-- second\n{}",
            first.sql(),
            second.sql()
        );

        if std::env::var_os("PGSHIFT_DESIRED_SHOW").is_some() {
            eprintln!("{context}");
        }
        let live = cluster().fresh_database("pairs_live").expect("database");
        cluster()
            .psql(&live, &(first.sql() + &first.rows()))
            .unwrap_or_else(|e| panic!("{context}\nthe first schema loads: {e}"));
        let desired = work.join(format!("desired-{seed}.sql"));
        fs::write(&desired, second.sql()).expect("written");
        let target = desired.to_str().expect("UTF-8");
        // A plan that changes row security or policies runs with its review.
        let (_, reviewed) = pgshift_json(&live, &["diff", target]);
        let mut args = vec!["apply", "--desired", target, "--allow-destructive"];
        let access = reviewed["access_review"].as_str().map(str::to_owned);
        if let Some(access) = &access {
            args.extend(["--expect-rls-review", access]);
        }
        let (code, applied) = pgshift_json(&live, &args);
        assert_eq!(code, 0, "{context}\n{applied}");
        let (code, report) = pgshift_json(&live, &["diff", target]);
        assert_eq!(code, 0, "{context}\n{report}");
        assert_eq!(
            report["changes"].as_array().map(Vec::len),
            Some(0),
            "{context}\n{report}"
        );

        let native = cluster().fresh_database("pairs_native").expect("database");
        cluster()
            .psql(&native, &second.sql())
            .expect("the second schema loads");
        let only_app = ["--schema=app"];
        assert_eq!(
            dump_with(&live, &only_app),
            dump_with(&native, &only_app),
            "{context}"
        );
        if first.events.is_some() && second.events.is_some() {
            assert_eq!(count(&live, "ev"), "20", "{context}\nrows of ev");
        }
        for table in &second.tables {
            if first.tables.iter().any(|t| t.name == table.name) {
                assert_eq!(
                    count(&live, &table.name),
                    "20",
                    "{context}\nrows of {}",
                    table.name
                );
            }
        }
    }
    eprintln!("desired pairs: mutations drawn: {tally:?}");
    let _ = fs::remove_dir_all(&work);
}
