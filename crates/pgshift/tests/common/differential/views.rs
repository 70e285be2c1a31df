//! Views with things attached (CO-15): the SQL that makes them as a careful person
//! would (and makes them again around a native type change PostgreSQL refuses while
//! they read the column), and the writes through them whose effects on the table and
//! on `item_audit` both sides must share.

use std::fmt::Write as _;

use super::shape::Shape;

/// What reads the table besides the plain `item_view`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViewTies {
    None,
    /// `item_entry`: an `INSTEAD OF INSERT OR UPDATE OR DELETE` row trigger that
    /// writes the table and `item_audit` (and protects rows from `DELETE`), a statement
    /// trigger, comments.
    Triggers,
    /// `item_ruled`: `DO INSTEAD` rules — `DELETE` does nothing, `UPDATE` writes the
    /// table and `item_audit`, `INSERT` only `item_audit` — with comments and grants.
    Rules,
    /// `item_guarded`: `security_barrier`, `security_invoker` (PostgreSQL 15+),
    /// `CASCADED CHECK OPTION`, a column default, comments, grants with grant options
    /// and column grants.
    Options,
    /// `item_outer` on `item_inner` on the table: refused (`nested-dependent-views`).
    Nested,
    /// `item_totals`, a materialized view with a unique index: refused
    /// (`dependent-materialized-view`).
    Materialized,
}

/// Every value.
pub const VIEW_TIES: [ViewTies; 6] = [
    ViewTies::None,
    ViewTies::Triggers,
    ViewTies::Rules,
    ViewTies::Options,
    ViewTies::Nested,
    ViewTies::Materialized,
];

impl ViewTies {
    /// The views made, in the order they are made.
    pub fn views(self) -> &'static [&'static str] {
        match self {
            ViewTies::None => &[],
            ViewTies::Triggers => &["item_entry"],
            ViewTies::Rules => &["item_ruled"],
            ViewTies::Options => &["item_guarded"],
            ViewTies::Nested => &["item_inner", "item_outer"],
            ViewTies::Materialized => &["item_totals"],
        }
    }

    fn keyword(self) -> &'static str {
        match self {
            ViewTies::Materialized => "MATERIALIZED VIEW",
            _ => "VIEW",
        }
    }

    /// What the views write to, and the trigger function (made once, never dropped).
    pub fn seed_support(self, s: &mut String, shape: &Shape) {
        if matches!(
            self,
            ViewTies::None | ViewTies::Nested | ViewTies::Materialized
        ) {
            return;
        }
        s.push_str(
            "CREATE TABLE item_audit (n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, op text NOT NULL, k text);\n\
             GRANT SELECT, INSERT ON item_audit TO diff_owner;\n",
        );
        if self == ViewTies::Triggers {
            let keys = shape.key_list();
            let first = shape.key_columns()[0];
            let new_keys = prefixed("NEW", shape);
            let old_keys = prefixed("OLD", shape);
            let _ = writeln!(
                s,
                "CREATE FUNCTION item_entry_write() RETURNS trigger LANGUAGE plpgsql AS $$\n\
                 BEGIN\n\
                   IF TG_OP = 'INSERT' THEN\n\
                     UPDATE public.item SET note = NEW.note, qty = NEW.qty WHERE ({keys}) = ({new_keys});\n\
                     INSERT INTO public.item_audit (op, k) VALUES ('trigger INSERT', NEW.{first}::text);\n\
                     RETURN NEW;\n\
                   ELSIF TG_OP = 'UPDATE' THEN\n\
                     UPDATE public.item SET qty = NEW.qty WHERE ({keys}) = ({old_keys});\n\
                     INSERT INTO public.item_audit (op, k) VALUES ('trigger UPDATE', OLD.{first}::text);\n\
                     RETURN NEW;\n\
                   END IF;\n\
                   INSERT INTO public.item_audit (op, k) VALUES ('trigger kept', OLD.{first}::text);\n\
                   RETURN OLD;\n\
                 END $$;\n\
                 CREATE FUNCTION item_entry_statement() RETURNS trigger LANGUAGE plpgsql AS $$\n\
                 BEGIN INSERT INTO public.item_audit (op) VALUES ('statement ' || TG_OP); RETURN NULL; END $$;"
            );
        }
    }

    /// The views with everything attached, as the seed makes them (owners aside).
    pub fn view_sql(self, shape: &Shape, version: i32) -> String {
        let keys = shape.key_list();
        let first = shape.key_columns()[0];
        match self {
            ViewTies::None => String::new(),
            ViewTies::Triggers => format!(
                "CREATE VIEW item_entry AS SELECT {keys}, qty, note FROM item WHERE base > 0;\n\
                 CREATE TRIGGER item_entry_write INSTEAD OF INSERT OR UPDATE OR DELETE ON item_entry FOR EACH ROW EXECUTE FUNCTION item_entry_write();\n\
                 CREATE TRIGGER item_entry_statement AFTER INSERT ON item_entry FOR EACH STATEMENT EXECUTE FUNCTION item_entry_statement();\n\
                 COMMENT ON TRIGGER item_entry_write ON item_entry IS 'writes and audits';\n\
                 COMMENT ON VIEW item_entry IS 'entry';\n\
                 GRANT SELECT, INSERT, UPDATE ON item_entry TO diff_writer;\n"
            ),
            ViewTies::Rules => format!(
                "CREATE VIEW item_ruled AS SELECT {keys}, qty, note FROM item WHERE base > 0;\n\
                 CREATE RULE item_ruled_keep AS ON DELETE TO item_ruled DO INSTEAD NOTHING;\n\
                 CREATE RULE item_ruled_update AS ON UPDATE TO item_ruled DO INSTEAD (\n\
                   UPDATE item SET qty = NEW.qty WHERE ({keys}) = ({old_keys});\n\
                   INSERT INTO item_audit (op, k) VALUES ('rule UPDATE', OLD.{first}::text));\n\
                 CREATE RULE item_ruled_insert AS ON INSERT TO item_ruled DO INSTEAD\n\
                   INSERT INTO item_audit (op, k) VALUES ('rule INSERT', NEW.{first}::text);\n\
                 COMMENT ON RULE item_ruled_keep ON item_ruled IS 'rows are never deleted through the view';\n\
                 GRANT SELECT, UPDATE ON item_ruled TO diff_writer WITH GRANT OPTION;\n",
                old_keys = prefixed("OLD", shape),
            ),
            ViewTies::Options => format!(
                "CREATE VIEW item_guarded WITH (security_barrier{invoker}) AS SELECT {keys}, qty, note FROM item WHERE qty >= 0 WITH CASCADED CHECK OPTION;\n\
                 ALTER VIEW item_guarded ALTER COLUMN note SET DEFAULT 'from the view';\n\
                 COMMENT ON VIEW item_guarded IS 'guarded';\n\
                 COMMENT ON COLUMN item_guarded.qty IS 'quantity through the view';\n\
                 GRANT SELECT ON item_guarded TO diff_reader;\n\
                 GRANT SELECT (note), UPDATE (qty) ON item_guarded TO diff_writer WITH GRANT OPTION;\n",
                invoker = if version >= 150000 {
                    ", security_invoker"
                } else {
                    ""
                },
            ),
            ViewTies::Nested => format!(
                "CREATE VIEW item_inner AS SELECT {keys}, qty, note FROM item;\n\
                 CREATE VIEW item_outer AS SELECT {keys}, note FROM item_inner WHERE qty > 0;\n"
            ),
            ViewTies::Materialized => "CREATE MATERIALIZED VIEW item_totals AS SELECT count(*) AS n, sum(qty) AS total FROM item;\n\
                 CREATE UNIQUE INDEX item_totals_n ON item_totals (n);\n"
                .to_owned(),
        }
    }

    /// `ALTER … OWNER TO owner` for each view.
    pub fn owner_sql(self, owner: &str) -> String {
        self.views()
            .iter()
            .map(|view| format!("ALTER {} {view} OWNER TO {owner};\n", self.keyword()))
            .collect()
    }

    /// Whether PostgreSQL refuses a type change of `column` while the views exist,
    /// and copy-and-swap carries it out: `(drop, create)` as a careful person writes
    /// them (the views with everything attached, and their owner). Views pgshift
    /// refuses need none: the case never compares a run.
    pub fn dependents_of(
        self,
        shape: &Shape,
        column: &str,
        owner: Option<&str>,
        version: i32,
    ) -> Option<(String, String)> {
        let reads = column == "qty" || column == "note" || shape.key_columns().contains(&column);
        if !reads
            || !matches!(
                self,
                ViewTies::Triggers | ViewTies::Rules | ViewTies::Options
            )
        {
            return None;
        }
        let drop: String = self
            .views()
            .iter()
            .rev()
            .map(|view| format!("DROP {} {view};\n", self.keyword()))
            .collect();
        let mut create = self.view_sql(shape, version);
        if let Some(owner) = owner {
            create.push_str(&self.owner_sql(owner));
        }
        Some((drop, create))
    }

    /// Writes through the views (`INSERT`, `UPDATE`, `DELETE`, one row per statement
    /// so that the audit's order does not follow the heap's, on rows picked by
    /// `code`), run as the superuser on both sides after the statement; `None` where
    /// there is nothing to write through, or where pgshift refuses every statement on
    /// the shape (inheritance: the writes would reach the heir, which a publication
    /// may keep from being updated).
    pub fn behaviour_sql(self, shape: &Shape) -> Option<String> {
        if shape.inheritance != super::shape::Inheritance::None {
            return None;
        }
        let keys = shape.key_list();
        let pick = |offset: u32| {
            format!("({keys}) IN (SELECT {keys} FROM item ORDER BY code OFFSET {offset} LIMIT 1)")
        };
        let (view, insert) = match self {
            ViewTies::Triggers => ("item_entry", true),
            ViewTies::Rules => ("item_ruled", true),
            ViewTies::Options => ("item_guarded", false),
            ViewTies::None | ViewTies::Nested | ViewTies::Materialized => return None,
        };
        let mut sql = String::new();
        for row in 0..2u32 {
            if insert {
                let _ = writeln!(
                    sql,
                    "INSERT INTO {view} ({keys}, qty, note) SELECT {keys}, {}, 'through the view' FROM item ORDER BY code OFFSET {row} LIMIT 1;",
                    7 + row
                );
            }
            let _ = writeln!(
                sql,
                "UPDATE {view} SET qty = qty + 5 WHERE {};",
                pick(2 + row)
            );
            let _ = writeln!(sql, "DELETE FROM {view} WHERE {};", pick(4 + row));
        }
        Some(sql)
    }
}

/// The key columns as `prefix.column`, comma-separated.
fn prefixed(prefix: &str, shape: &Shape) -> String {
    shape
        .key_columns()
        .iter()
        .map(|c| format!("{prefix}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}
