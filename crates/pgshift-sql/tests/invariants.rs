//! The SQL boundary's invariant: statements are located by PostgreSQL's grammar.

// INV: CO-1 — located by the grammar; an error stops everything after it.
#[test]
fn inv_co_1_statements_are_located_by_the_grammar_not_by_semicolons() {
    let text = "SELECT ';' AS a; -- ; in a comment\nCREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$\nBEGIN RETURN 1; END;\n$body$;\nSELECT \"x;y\" FROM t";
    let statements = pgshift_sql::parse(text).expect("valid SQL");
    let texts: Vec<&str> = statements.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert_eq!(texts[0], "SELECT ';' AS a");
    assert!(texts[1].starts_with("CREATE FUNCTION") && texts[1].ends_with("$body$"));
    assert_eq!(texts[2], "SELECT \"x;y\" FROM t");
    assert_eq!(statements[2].position.line, 5);

    let broken = "SELECT 1;\nSELEC 2;\nDROP TABLE t;";
    let err = pgshift_sql::parse(broken).expect_err("an error stops the whole text");
    assert_eq!(err.position().map(|p| p.line), Some(2));
}
