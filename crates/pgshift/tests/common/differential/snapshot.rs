//! A normalized snapshot of a database as its users see it: the catalog of every
//! user schema, one fact per line, by name (OIDs, relfilenodes, attnums, sizes and
//! planner statistics left out), and the data of every table, row by row in key order.
//!
//! Left out on purpose: the `pgshift` schema (the engine's run records), objects that
//! belong to an extension, and planner statistics (`pg_statistic`: not carried by
//! copy-and-swap, see `docs/COPY-AND-SWAP.md`, and written by autovacuum at any time).

use tokio_postgres::Client;

/// The lines of a snapshot, sorted (a multiset: equal lines are kept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub catalog: Vec<String>,
    pub data: Vec<String>,
}

/// A column whose values are compared other than row by row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mask {
    /// As a multiset of values (which row got which value may differ).
    Multiset,
    /// By how many rows have a value and how many distinct values there are.
    Distinct,
}

/// Settings of the snapshot session, so that text forms are the same on both sides.
const SETTINGS: &str = "SET search_path = pg_catalog; SET TimeZone = 'UTC'; \
    SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres'; SET extra_float_digits = 3; \
    SET bytea_output = 'hex'; SET statement_timeout = '120s'";

/// The namespaces in scope.
const NAMESPACES: &str = "ns AS (SELECT n.oid, n.nspname FROM pg_namespace n \
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgshift') AND n.nspname !~ '^pg_(toast|temp)')";

fn acl(column: &str) -> String {
    format!("(SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest({column}) x)")
}

fn not_extension(catalog: &str, oid: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = '{catalog}'::regclass AND e.objid = {oid} AND e.deptype = 'e')"
    )
}

/// The catalog query for a server of `version` (`server_version_num`).
pub fn catalog_sql(version: i32) -> String {
    let member_details = if version >= 150000 {
        "format(' where=%s columns=%s', pg_get_expr(pr.prqual, pr.prrelid), \
           (SELECT string_agg(a.attname, ',' ORDER BY a.attnum) FROM pg_attribute a WHERE a.attrelid = pr.prrelid AND a.attnum = ANY (pr.prattrs)))"
    } else {
        "''"
    };
    let relation_lines = format!(
        "SELECT format('relation %s kind=%s persistence=%s owner=%s tablespace=%s replident=%s rls=%s/%s options=%s toast_options=%s am=%s comment=%s acl=%s partkey=%s bound=%s parents=%s oftype=%s', \
            r.qname, r.relkind, r.relpersistence, pg_get_userbyid(r.relowner), coalesce(ts.spcname, '-'), r.relreplident, \
            r.relrowsecurity, r.relforcerowsecurity, r.reloptions, tc.reloptions, am.amname, obj_description(r.oid, 'pg_class'), {relacl}, \
            CASE WHEN r.relkind = 'p' THEN pg_get_partkeydef(r.oid) END, pg_get_expr(r.relpartbound, r.oid), \
            (SELECT string_agg(p.qname, ',' ORDER BY i.inhseqno) FROM pg_inherits i JOIN rel p ON p.oid = i.inhparent WHERE i.inhrelid = r.oid), \
            NULLIF(r.reloftype, 0)::regtype) \
           FROM rel r LEFT JOIN pg_tablespace ts ON ts.oid = r.reltablespace LEFT JOIN pg_class tc ON tc.oid = r.reltoastrelid \
           LEFT JOIN pg_am am ON am.oid = r.relam WHERE r.relkind IN ('r', 'p', 'v', 'm', 'f', 'c') \
         UNION ALL SELECT format('view %s %s', r.qname, regexp_replace(pg_get_viewdef(r.oid), '\\s+', ' ', 'g')) FROM rel r WHERE r.relkind IN ('v', 'm')",
        relacl = acl("r.relacl"),
    );
    let column_lines = format!(
        "SELECT format('column %s.%s pos=%s type=%s collation=%s notnull=%s default=%s identity=%s generated=%s stattarget=%s storage=%s compression=%s options=%s comment=%s acl=%s local=%s inhcount=%s', \
            r.qname, a.attname, row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum), format_type(a.atttypid, a.atttypmod), co.collname, \
            a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated, coalesce(a.attstattarget::int, -1), a.attstorage, \
            a.attcompression, array(SELECT o FROM unnest(a.attoptions) o WHERE o NOT LIKE 'pg_attver=%'), col_description(r.oid, a.attnum), {attacl}, a.attislocal, a.attinhcount) \
           FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped \
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum LEFT JOIN pg_collation co ON co.oid = a.attcollation \
          WHERE r.relkind IN ('r', 'p', 'v', 'm', 'f', 'c') \
         UNION ALL SELECT format('index-column %s.%s target=%s', r.qname, a.attnum, a.attstattarget) \
           FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid WHERE r.relkind IN ('i', 'I') AND coalesce(a.attstattarget::int, -1) <> -1",
        attacl = acl("a.attacl"),
    );
    let index_lines = "SELECT format('index %s table=%s def=%s tablespace=%s clustered=%s replident=%s valid=%s ready=%s live=%s comment=%s parent=%s', \
            ir.qname, tr.qname, pg_get_indexdef(i.indexrelid), coalesce(ts.spcname, '-'), i.indisclustered, i.indisreplident, \
            i.indisvalid, i.indisready, i.indislive, obj_description(i.indexrelid, 'pg_class'), \
            (SELECT p.qname FROM pg_inherits h JOIN rel p ON p.oid = h.inhparent WHERE h.inhrelid = ir.oid)) \
           FROM pg_index i JOIN rel ir ON ir.oid = i.indexrelid JOIN rel tr ON tr.oid = i.indrelid \
           LEFT JOIN pg_tablespace ts ON ts.oid = ir.reltablespace";
    let constraint_lines = "SELECT format('constraint %s.%s type=%s def=%s deferrable=%s deferred=%s validated=%s local=%s inhcount=%s noinherit=%s parent=%s index=%s comment=%s', \
            coalesce(r.qname, ty.qname), c.conname, c.contype, pg_get_constraintdef(c.oid), c.condeferrable, c.condeferred, c.convalidated, \
            c.conislocal, c.coninhcount, c.connoinherit, \
            (SELECT format('%s.%s', pr.qname, pc.conname) FROM pg_constraint pc LEFT JOIN rel pr ON pr.oid = pc.conrelid WHERE pc.oid = c.conparentid), \
            ix.qname, obj_description(c.oid, 'pg_constraint')) \
           FROM pg_constraint c LEFT JOIN rel r ON r.oid = c.conrelid LEFT JOIN typ ty ON ty.oid = c.contypid \
           LEFT JOIN rel ix ON ix.oid = c.conindid WHERE r.oid IS NOT NULL OR ty.oid IS NOT NULL";
    let trigger_lines = "SELECT format('trigger %s.%s enabled=%s def=%s comment=%s parent=%s', r.qname, t.tgname, t.tgenabled, \
            pg_get_triggerdef(t.oid), obj_description(t.oid, 'pg_trigger'), \
            (SELECT format('%s.%s', pr.qname, pt.tgname) FROM pg_trigger pt JOIN rel pr ON pr.oid = pt.tgrelid WHERE pt.oid = t.tgparentid)) \
           FROM pg_trigger t JOIN rel r ON r.oid = t.tgrelid WHERE NOT t.tgisinternal OR (t.tgparentid <> 0 AND t.tgconstraint = 0) \
         UNION ALL SELECT format('internal-trigger %s constraint=%s function=%s type=%s enabled=%s deferrable=%s/%s', \
            r.qname, con.conname, t.tgfoid::regproc, t.tgtype, t.tgenabled, t.tgdeferrable, t.tginitdeferred) \
           FROM pg_trigger t JOIN rel r ON r.oid = t.tgrelid LEFT JOIN pg_constraint con ON con.oid = t.tgconstraint \
          WHERE t.tgisinternal AND NOT (t.tgparentid <> 0 AND t.tgconstraint = 0)";
    let policy_lines = "SELECT format('policy %s.%s permissive=%s cmd=%s roles=%s using=%s check=%s comment=%s', r.qname, p.polname, \
            p.polpermissive, p.polcmd, \
            (SELECT string_agg(x, ',' ORDER BY x) FROM (SELECT CASE WHEN o = 0 THEN 'public' ELSE pg_get_userbyid(o)::text END AS x FROM unnest(p.polroles) o) s), \
            pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid), obj_description(p.oid, 'pg_policy')) \
           FROM pg_policy p JOIN rel r ON r.oid = p.polrelid";
    let publication_lines = format!(
        "SELECT format('publication %s owner=%s all=%s actions=%s/%s/%s/%s via_root=%s comment=%s', p.pubname, pg_get_userbyid(p.pubowner), \
            p.puballtables, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, p.pubviaroot, obj_description(p.oid, 'pg_publication')) \
           FROM pg_publication p \
         UNION ALL SELECT format('publication-member %s %s', p.pubname, r.qname) || {member_details} \
           FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid JOIN rel r ON r.oid = pr.prrelid"
    );
    let sequence_lines = format!(
        "SELECT format('sequence %s type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s owner=%s acl=%s comment=%s owned_by=%s state=%s', \
            r.qname, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle, \
            pg_get_userbyid(r.relowner), {seqacl}, obj_description(r.oid, 'pg_class'), \
            (SELECT string_agg(format('%s.%s:%s', t.qname, a.attname, d.deptype), ',' ORDER BY t.qname, a.attname) \
               FROM pg_depend d JOIN rel t ON t.oid = d.refobjid JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid \
              WHERE d.classid = 'pg_class'::regclass AND d.objid = r.oid AND d.refclassid = 'pg_class'::regclass \
                AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i')), \
            regexp_replace(query_to_xml(format('SELECT last_value, is_called FROM %s', r.qname), false, true, '')::text, '\\s+', '', 'g')) \
           FROM rel r JOIN pg_sequence s ON s.seqrelid = r.oid",
        seqacl = acl("r.relacl"),
    );
    let other_lines = format!(
        "SELECT format('statistics %I.%I def=%s target=%s owner=%s comment=%s', n.nspname, s.stxname, pg_get_statisticsobjdef(s.oid), \
            coalesce(s.stxstattarget::int, -1), pg_get_userbyid(s.stxowner), obj_description(s.oid, 'pg_statistic_ext')) \
           FROM pg_statistic_ext s JOIN ns n ON n.oid = s.stxnamespace \
         UNION ALL SELECT format('rule %s.%s %s', r.qname, w.rulename, pg_get_ruledef(w.oid)) \
           FROM pg_rewrite w JOIN rel r ON r.oid = w.ev_class WHERE w.rulename <> '_RETURN' \
         UNION ALL SELECT format('type %s kind=%s owner=%s acl=%s base=%s notnull=%s default=%s labels=%s comment=%s', ty.qname, ty.typtype, \
            pg_get_userbyid(ty.typowner), {typacl}, CASE WHEN ty.typtype = 'd' THEN format_type(ty.typbasetype, ty.typtypmod) END, \
            ty.typnotnull, ty.typdefault, (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = ty.oid), \
            obj_description(ty.oid, 'pg_type')) FROM typ ty \
         UNION ALL SELECT format('function %I.%I(%s) owner=%s acl=%s definer=%s volatility=%s config=%s body=%s', n.nspname, p.proname, \
            pg_get_function_identity_arguments(p.oid), pg_get_userbyid(p.proowner), {proacl}, p.prosecdef, p.provolatile, p.proconfig, md5(p.prosrc)) \
           FROM pg_proc p JOIN ns n ON n.oid = p.pronamespace WHERE {proc_not_extension} \
         UNION ALL SELECT format('schema %I owner=%s acl=%s comment=%s', n.nspname, pg_get_userbyid(n.nspowner), {nspacl}, \
            obj_description(n.oid, 'pg_namespace')) FROM pg_namespace n JOIN ns ON ns.oid = n.oid \
         UNION ALL SELECT format('default-acl role=%s schema=%s type=%s acl=%s', pg_get_userbyid(d.defaclrole), d.defaclnamespace::regnamespace, \
            d.defaclobjtype, {defacl}) FROM pg_default_acl d \
         UNION ALL SELECT format('extension %s version=%s schema=%s', e.extname, e.extversion, e.extnamespace::regnamespace) FROM pg_extension e",
        typacl = acl("ty.typacl"),
        proacl = acl("p.proacl"),
        nspacl = acl("n.nspacl"),
        defacl = acl("d.defaclacl"),
        proc_not_extension = not_extension("pg_proc", "p.oid"),
    );
    format!(
        "WITH {NAMESPACES}, \
         rel AS (SELECT c.*, format('%I.%I', ns.nspname, c.relname) AS qname FROM pg_class c JOIN ns ON ns.oid = c.relnamespace \
                  WHERE {rel_not_extension}), \
         typ AS (SELECT t.*, format('%I.%I', ns.nspname, t.typname) AS qname FROM pg_type t JOIN ns ON ns.oid = t.typnamespace \
                  WHERE t.typtype IN ('e', 'd', 'r', 'm', 'b') AND t.typcategory <> 'A' AND {typ_not_extension}), \
         lines(line) AS ({relation_lines} UNION ALL {column_lines} UNION ALL {index_lines} UNION ALL {constraint_lines} \
                   UNION ALL {trigger_lines} UNION ALL {policy_lines} UNION ALL {publication_lines} UNION ALL {sequence_lines} \
                   UNION ALL {other_lines}) \
         SELECT line FROM lines ORDER BY line",
        rel_not_extension = not_extension("pg_class", "c.oid"),
        typ_not_extension = not_extension("pg_type", "t.oid"),
    )
}

/// The tables whose rows are compared: every user table that is not a partition
/// (a partitioned table's rows are read through it, each with the partition it is in).
const TABLES_SQL: &str = "WITH ns AS (SELECT n.oid, n.nspname FROM pg_namespace n \
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgshift') AND n.nspname !~ '^pg_(toast|temp)') \
  SELECT format('%I.%I', ns.nspname, c.relname), c.relkind::text, \
    (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY array_position(i.indkey::int2[], a.attnum)) \
       FROM pg_index i JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY (i.indkey) \
      WHERE i.indrelid = c.oid AND i.indisprimary), \
    (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a \
      WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), \
    (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
      WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND t.typstorage <> 'p') \
    FROM pg_class c JOIN ns ON ns.oid = c.relnamespace \
   WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition \
     AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_class'::regclass AND e.objid = c.oid AND e.deptype = 'e') \
   ORDER BY 1";

fn quote(name: &str) -> String {
    pgshift_sql::quote_ident(name).to_string()
}

/// Reads the snapshot of the database `client` is connected to (as a superuser, so
/// that row security filters nothing).
pub async fn read(client: &Client, version: i32) -> Result<Snapshot, tokio_postgres::Error> {
    client.batch_execute(SETTINGS).await?;
    let catalog: Vec<String> = client
        .query(catalog_sql(version).as_str(), &[])
        .await?
        .iter()
        .map(|row| row.get::<_, Option<String>>(0).unwrap_or_default())
        .collect();
    let data = read_data(client, None).await?;
    Ok(Snapshot { catalog, data })
}

/// [`read`] with `masked` (`table`, `column`) compared as [`Mask`] says instead of
/// row by row, keeping the catalog of `unmasked` (a mask changes only how
/// rows are compared, and the catalog query is the costliest part of a snapshot: its
/// planning alone took a tenth of the differential's server time).
pub async fn read_masked(
    client: &Client,
    unmasked: &Snapshot,
    masked: (&str, &str, Mask),
) -> Result<Snapshot, tokio_postgres::Error> {
    client.batch_execute(SETTINGS).await?;
    Ok(Snapshot {
        catalog: unmasked.catalog.clone(),
        data: read_data(client, Some(masked)).await?,
    })
}

/// The data lines of every table (see [`read`]).
async fn read_data(
    client: &Client,
    masked: Option<(&str, &str, Mask)>,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let mut data = Vec::new();
    for table in client.query(TABLES_SQL, &[]).await? {
        let name: String = table.get(0);
        let kind: String = table.get(1);
        let key: Option<String> = table.get(2);
        let columns: Vec<String> = table.get::<_, Option<Vec<String>>>(3).unwrap_or_default();
        let toastable: Vec<String> = table.get::<_, Option<Vec<String>>>(4).unwrap_or_default();
        let mask = masked.filter(|(t, _, _)| name == format!("public.{t}"));
        let values: Vec<String> = columns
            .iter()
            .filter(|c| mask.is_none_or(|(_, m, _)| m != c.as_str()))
            .map(|c| format!("t.{}", quote(c)))
            .collect();
        let compression: Vec<String> = toastable
            .iter()
            .map(|c| format!("coalesce(pg_column_compression(t.{})::text, '-')", quote(c)))
            .collect();
        let row = if values.is_empty() {
            "'()'".to_owned()
        } else {
            format!("ROW({})::text", values.join(", "))
        };
        let compression = if compression.is_empty() {
            "''".to_owned()
        } else {
            format!(
                "' compression=' || concat_ws(',', {})",
                compression.join(", ")
            )
        };
        let only = if kind == "p" { "" } else { "ONLY " };
        let order = key.unwrap_or_else(|| "1".to_owned());
        let sql = format!(
            "SELECT {name_literal} || ' ' || t.tableoid::regclass::text || ' ' || {row} || {compression} AS line \
               FROM {only}{name} t ORDER BY {order}",
            name_literal = pgshift_sql::quote_literal(&name),
        );
        let sql = if order == "1" {
            format!("SELECT line FROM ({sql}) s ORDER BY line")
        } else {
            sql
        };
        for row in client.query(sql.as_str(), &[]).await? {
            data.push(row.get(0));
        }
        if let Some((_, column, mask)) = mask {
            let column = quote(column);
            let sql = match mask {
                Mask::Multiset => format!(
                    "SELECT format('values %s.%s %s', {n}, {c}, string_agg(v, ',' ORDER BY v)) \
                       FROM (SELECT t.{column}::text AS v FROM {only}{name} t) s",
                    n = pgshift_sql::quote_literal(&name),
                    c = pgshift_sql::quote_literal(&column),
                ),
                Mask::Distinct => format!(
                    "SELECT format('values %s.%s rows=%s values=%s distinct=%s', {n}, {c}, count(*), count(t.{column}), count(DISTINCT t.{column})) \
                       FROM {only}{name} t",
                    n = pgshift_sql::quote_literal(&name),
                    c = pgshift_sql::quote_literal(&column),
                ),
            };
            data.push(client.query_one(sql.as_str(), &[]).await?.get(0));
        }
    }
    Ok(data)
}

/// Lines of `expected` missing from `actual`, and lines of `actual` not in `expected`
/// (as multisets).
pub fn difference(expected: &[String], actual: &[String]) -> (Vec<String>, Vec<String>) {
    let mut missing = Vec::new();
    let mut extra = Vec::new();
    let (mut i, mut j) = (0, 0);
    let mut a: Vec<&String> = expected.iter().collect();
    let mut b: Vec<&String> = actual.iter().collect();
    a.sort();
    b.sort();
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => {
                missing.push((*x).clone());
                i += 1;
            }
            (Some(_), Some(y)) => {
                extra.push((*y).clone());
                j += 1;
            }
            (Some(x), None) => {
                missing.push((*x).clone());
                i += 1;
            }
            (None, Some(y)) => {
                extra.push((*y).clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    (missing, extra)
}
