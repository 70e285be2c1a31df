//! `ATTACH PARTITION` of a populated table, online: pgshift adds a `NOT VALID` check
//! implying the bound, validates it while reads and writes continue, attaches, and
//! drops the check. The oracle is PostgreSQL's own word: run with
//! `client_min_messages = debug1`, the ATTACH step must report that the partition
//! constraint "is implied by existing constraints", which is the message PostgreSQL
//! gives when it skips the scan under ACCESS EXCLUSIVE.

mod common;

use std::fs;

use common::schema::{cluster, pgshift_json, scratch};

const SCHEMA: &str = "CREATE SCHEMA a;
    CREATE TABLE a.ev (id bigint NOT NULL, t integer NOT NULL) PARTITION BY RANGE (t);
    CREATE TABLE a.ev_0 PARTITION OF a.ev FOR VALUES FROM (0) TO (10);
    CREATE TABLE a.ev_1 (id bigint NOT NULL, t integer NOT NULL);
    INSERT INTO a.ev_1 SELECT g, 10 + g % 10 FROM generate_series(1, 2000) g;
    CREATE TABLE a.ev_top (id bigint NOT NULL, t integer NOT NULL);
    INSERT INTO a.ev_top SELECT g, 100 + g FROM generate_series(1, 2000) g;
    CREATE TABLE a.lst (id integer, k text) PARTITION BY LIST (k);
    CREATE TABLE a.lst_a (id integer, k text);
    INSERT INTO a.lst_a SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END
        FROM generate_series(1, 2000) g;
    ANALYZE;";

const ATTACH: &str = "ALTER TABLE a.ev ATTACH PARTITION a.ev_1 FOR VALUES FROM (10) TO (20);
ALTER TABLE a.ev ATTACH PARTITION a.ev_top FOR VALUES FROM (100) TO (MAXVALUE);
ALTER TABLE a.lst ATTACH PARTITION a.lst_a FOR VALUES IN ('a', 'b');
";

/// Runs `sql` with DEBUG1 notices on, returning their texts.
fn notices_of(db: &str, sql: &[String]) -> Vec<String> {
    let url = cluster().connection_string(db);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let (client, mut connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connects");
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                match message {
                    Ok(tokio_postgres::AsyncMessage::Notice(notice)) => {
                        let _ = sender.send(notice.message().to_owned());
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        client
            .batch_execute("SET client_min_messages = debug1")
            .await
            .expect("debug notices");
        for statement in sql {
            client
                .batch_execute(statement)
                .await
                .expect("the step runs");
        }
        drop(client);
        let mut out = Vec::new();
        while let Some(notice) = receiver.recv().await {
            out.push(notice);
        }
        out
    })
}

#[test]
fn attaching_a_populated_partition_validates_a_check_first_so_the_attach_does_not_scan() {
    let work = scratch("attach_online");
    let file = work.join("attach.sql");
    fs::write(&file, ATTACH).expect("written");
    let file = file.to_str().expect("UTF-8");

    let planned = cluster().fresh_database("attach_plan").expect("database");
    cluster().psql(&planned, SCHEMA).expect("the schema loads");
    let (code, plan) = pgshift_json(&planned, &["plan", file]);
    assert_eq!(code, 0, "{plan}");
    let statements = plan["files"][0]["statements"]
        .as_array()
        .expect("statements");
    assert_eq!(statements.len(), 3, "{plan}");
    let mut steps = Vec::new();
    for statement in statements {
        assert_eq!(statement["route"], "native-sequence", "{statement}");
        let sql: Vec<String> = statement["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .filter_map(|s| s["sql"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(sql.len(), 4, "{statement}");
        steps.extend(sql);
    }
    // PostgreSQL, not pgshift, says whether the ATTACH scanned.
    let notices = notices_of(&planned, &steps);
    for partition in ["ev_1", "ev_top", "lst_a"] {
        let implied = format!(
            "partition constraint for table \"{partition}\" is implied by existing constraints"
        );
        assert!(
            notices.contains(&implied),
            "{partition} was scanned under the lock: {notices:?}"
        );
    }

    // Through apply: every row in its parent, no scaffold check left.
    let applied = cluster().fresh_database("attach_apply").expect("database");
    cluster().psql(&applied, SCHEMA).expect("the schema loads");
    let (code, report) = pgshift_json(&applied, &["apply", file]);
    assert_eq!(code, 0, "{report}");
    let counted = cluster()
        .psql(
            &applied,
            "SELECT (SELECT count(*) FROM a.ev) || ' ' || (SELECT count(*) FROM a.lst) || ' ' || \
             (SELECT count(*) FROM pg_catalog.pg_constraint WHERE conname LIKE '%pgshift_bound');",
        )
        .expect("counted");
    assert_eq!(counted.trim(), "4000 2000 0");
    let _ = fs::remove_dir_all(&work);
}
