//! D1's generated schema, and the edit made to its pulled files before the diff.
//!
//! The same number of tables always gives the same text: names, foreign keys and
//! comments follow from each table's number alone.

use pgshift_sql::NodeEnum;

/// The schema the tables are created in.
pub const SCHEMA: &str = "app";

/// Statements each table's script holds.
pub const STATEMENTS_PER_TABLE: usize = 5;

/// Tables whose pulled file D1 edits before the diff (fewer when the schema has
/// fewer tables).
pub const EDITED_TABLES: u32 = 10;

/// The column the edit adds.
pub const ADDED_COLUMN: &str = "d1_added text";

/// What each table holds, in words.
pub const SHAPE: &str = "a bigint primary key, five columns (a foreign-key column, text, \
    an integer with a default, numeric, a timestamptz with a default), a check, two indexes, \
    a comment and a foreign key to an earlier table (the first table's to itself)";

/// The name of table `number` (from 1) of `tables`: `t0001`, zero-padded to four
/// digits or to the width of `tables`.
pub fn table_name(number: u32, tables: u32) -> String {
    let width = tables.to_string().len().max(4);
    format!("t{number:0width$}")
}

/// The table `number` (from 1) refers to: an earlier one picked by a
/// multiplicative hash of its number, so that the references spread over the
/// schema; the first table refers to itself.
pub fn parent(number: u32) -> u32 {
    if number <= 1 {
        1
    } else {
        let earlier = (u64::from(number) * 2_654_435_761) % u64::from(number - 1);
        1 + u32::try_from(earlier).unwrap_or(0)
    }
}

/// The statements creating table `number` of `tables`, as one script.
pub fn table_script(number: u32, tables: u32) -> String {
    let name = table_name(number, tables);
    let parent = table_name(parent(number), tables);
    format!(
        "CREATE TABLE {SCHEMA}.{name} (
    id bigint NOT NULL,
    parent_id bigint,
    label text NOT NULL,
    qty integer NOT NULL DEFAULT 0,
    price numeric(12,2),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT {name}_pkey PRIMARY KEY (id),
    CONSTRAINT {name}_qty_check CHECK (qty >= 0)
);
CREATE INDEX {name}_label_idx ON {SCHEMA}.{name} (label);
CREATE INDEX {name}_parent_created_idx ON {SCHEMA}.{name} (parent_id, created_at DESC);
COMMENT ON TABLE {SCHEMA}.{name} IS 'D1 generated table {number} of {tables}';
ALTER TABLE {SCHEMA}.{name} ADD CONSTRAINT {name}_parent_fkey
    FOREIGN KEY (parent_id) REFERENCES {SCHEMA}.{parent} (id);
"
    )
}

/// The whole schema, as scripts to run one after the other (each its own
/// transaction, so that no transaction holds the locks of every new relation):
/// the schema, then each table.
pub fn scripts(tables: u32) -> Vec<String> {
    std::iter::once(format!("CREATE SCHEMA {SCHEMA};\n"))
        .chain((1..=tables).map(|number| table_script(number, tables)))
        .collect()
}

/// Statements of [`scripts`].
pub fn statement_count(tables: u32) -> usize {
    1 + tables as usize * STATEMENTS_PER_TABLE
}

/// The tables D1 edits: `edited` of `tables`, spread evenly from the first.
pub fn edited(tables: u32, edited: u32) -> Vec<u32> {
    let edited = edited.min(tables);
    (0..edited)
        .map(|k| {
            1 + u32::try_from(u64::from(k) * u64::from(tables) / u64::from(edited)).unwrap_or(0)
        })
        .collect()
}

/// The pulled file of table `name` (`pull`'s layout: `SCHEMA/tables/NAME.sql`).
pub fn table_file(name: &str) -> String {
    use pgshift::desired::layout::file_name;
    format!("{}/tables/{}.sql", file_name(SCHEMA), file_name(name))
}

/// `file` (a pulled table file) with `column` appended to the column list of the
/// `CREATE TABLE` of `table`, as a person editing the file would add it.
pub fn add_column(file: &str, table: &str, column: &str) -> Result<String, String> {
    let statements = pgshift_sql::parse(file).map_err(|e| format!("{table}'s file: {e}"))?;
    let create = statements
        .iter()
        .find(|s| match &s.node {
            NodeEnum::CreateStmt(c) => c.relation.as_ref().is_some_and(|r| r.relname == table),
            _ => false,
        })
        .ok_or_else(|| format!("{table}'s file has no CREATE TABLE {table}"))?;
    let close = create
        .text
        .rfind(')')
        .map(|at| create.span.start + at)
        .ok_or_else(|| format!("the CREATE TABLE of {table} has no column list"))?;
    Ok(format!(
        "{},\n    {column}\n{}",
        file[..close].trim_end(),
        &file[close..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_padded_to_the_schema_s_width() {
        assert_eq!(table_name(7, 1000), "t0007");
        assert_eq!(table_name(7, 20_000), "t00007");
        assert_eq!(table_file("t0007"), "app/tables/t0007.sql");
    }

    #[test]
    fn every_table_refers_to_itself_first_then_to_an_earlier_one() {
        assert_eq!(parent(1), 1);
        assert_eq!(parent(2), 1);
        for number in 2..=2_000 {
            let p = parent(number);
            assert!((1..number).contains(&p), "{number} refers to {p}");
        }
        let distinct: std::collections::BTreeSet<u32> = (2..=1_000).map(parent).collect();
        assert!(distinct.len() > 300, "{} parents", distinct.len());
    }

    #[test]
    fn the_scripts_are_the_same_for_the_same_size_and_parse_into_their_count() {
        assert_eq!(scripts(30), scripts(30));
        let text: String = scripts(30).concat();
        let statements = pgshift_sql::parse(&text).expect("parses");
        assert_eq!(statements.len(), statement_count(30));
        assert!(text.contains("REFERENCES app.t0001 (id)"));
        assert!(text.contains("COMMENT ON TABLE app.t0030 IS 'D1 generated table 30 of 30'"));
    }

    #[test]
    fn the_edited_tables_spread_evenly_and_never_exceed_the_schema() {
        assert_eq!(
            edited(1_000, 10),
            vec![1, 101, 201, 301, 401, 501, 601, 701, 801, 901]
        );
        assert_eq!(edited(3, 10), vec![1, 2, 3]);
        assert!(edited(0, 10).is_empty());
    }

    #[test]
    fn a_column_is_appended_to_the_create_table_of_the_table() {
        let file = "CREATE TABLE app.t0001 (\n    id bigint NOT NULL,\n    CONSTRAINT t0001_qty_check CHECK ((qty >= 0))\n);\n\nCOMMENT ON TABLE app.t0001 IS 'x (y)';\n";
        let edited = add_column(file, "t0001", ADDED_COLUMN).expect("edits");
        assert_eq!(
            edited,
            "CREATE TABLE app.t0001 (\n    id bigint NOT NULL,\n    CONSTRAINT t0001_qty_check CHECK ((qty >= 0)),\n    d1_added text\n);\n\nCOMMENT ON TABLE app.t0001 IS 'x (y)';\n"
        );
        assert_eq!(pgshift_sql::parse(&edited).expect("parses").len(), 2);
        let missing = add_column(file, "t0002", ADDED_COLUMN).expect_err("no such table");
        assert!(missing.contains("t0002"), "{missing}");
    }
}
