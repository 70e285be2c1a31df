//! A small deterministic mutator for the stable harness: byte flips, interesting
//! bytes, dictionary tokens, deletions, duplications, splices and deep nesting, driven
//! by a seeded generator so that a run is repeatable from its seed.
//!
//! cargo-fuzz uses libFuzzer's own mutator, with [`DICTIONARY`] written out as
//! `fuzz/pgshift.dict` (a test keeps the two equal).

/// Tokens that SQL, connection strings, password files and migration names are made
/// of, including hostile identifiers (quotes, spaces, non-ASCII, reserved words,
/// 63-byte names).
pub const DICTIONARY: &[&str] = &[
    "CREATE ",
    "ALTER TABLE ",
    "INDEX ",
    "UNIQUE ",
    "CONCURRENTLY ",
    " ON ",
    "ONLY ",
    "ADD COLUMN ",
    "DROP COLUMN ",
    "ALTER COLUMN ",
    "TYPE bigint",
    "TYPE text",
    " USING ",
    "NOT NULL",
    "SET NOT NULL",
    "DEFAULT ",
    "now()",
    "random()",
    "NOT VALID",
    "VALIDATE CONSTRAINT ",
    "ADD CONSTRAINT ",
    "CHECK (",
    "FOREIGN KEY (",
    "REFERENCES ",
    "PRIMARY KEY ",
    "USING INDEX ",
    "PARTITION OF ",
    "PARTITION BY RANGE (",
    "ATTACH PARTITION ",
    "DETACH PARTITION ",
    " FINALIZE",
    "FOR VALUES FROM (",
    "DEFAULT",
    "GENERATED ALWAYS AS (",
    ") STORED",
    "IDENTITY",
    "SET TABLESPACE ",
    "RENAME TO ",
    "RENAME COLUMN ",
    "SET SCHEMA ",
    "DROP TABLE ",
    "DROP INDEX ",
    "TRUNCATE ",
    "REINDEX ",
    "VACUUM FULL ",
    "CLUSTER ",
    "LOCK TABLE ",
    " IN ACCESS EXCLUSIVE MODE",
    "CREATE TRIGGER ",
    "ENABLE ALWAYS TRIGGER ",
    "DISABLE TRIGGER ",
    "CREATE FUNCTION ",
    "INSERT INTO ",
    "UPDATE ",
    " SET ",
    "DELETE FROM ",
    " WHERE ",
    "SELECT ",
    "BEGIN;",
    "COMMIT;",
    "ROLLBACK;",
    "SET lock_timeout = '1s';",
    "SET LOCAL ",
    "SET session_replication_role = replica;",
    "-- no-transaction\n",
    "-- pgshift:no-transaction\n",
    "-- pgshift:allow ",
    "table-rewrite",
    "\"",
    "'",
    "$$",
    "$a$",
    "E'",
    ";",
    "(",
    ")",
    ",",
    ".",
    "/*",
    "*/",
    "--",
    "\n",
    "\r\n",
    "\t",
    "\\",
    "\"a b\"",
    "\"select\"",
    "\"Ünï\"",
    "\"a\"\"b\"",
    "user",
    "public.",
    "n23456789012345678901234567890123456789012345678901234567890123",
    "\u{e9}",
    "\u{1f600}",
    "\u{feff}",
    "postgres://",
    "postgresql://",
    "host=",
    "hostaddr=",
    "port=",
    "dbname=",
    "user=",
    "password=",
    "sslmode=",
    "verify-full",
    "sslrootcert=",
    "connect_timeout=",
    "options=",
    "target_session_attrs=",
    "passfile=",
    "PGHOST=",
    "PGPORT=",
    "PGUSER=",
    "PGPASSWORD=",
    "PGSSLMODE=",
    "PGDATABASE=",
    "PGCONNECT_TIMEOUT=",
    "%",
    "%2F",
    "@",
    "[::1]",
    ":",
    "?",
    "&",
    "=",
    "*:*:*:*:",
    "#",
    "0001_",
    "_",
    ".sql",
    "/",
];

/// Bytes that often matter to parsers.
const INTERESTING: &[u8] = &[
    0, b'\'', b'"', b';', b'\n', b'$', b'\\', b'(', b')', b'%', b'=', b':', b'@', b' ', 0x80, 0xc3,
    0xe2, 0xff,
];

/// A seeded xorshift generator (not for anything but choosing mutations).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (zero when `n` is zero).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// One to four mutations of `input`, with `others` as splice partners; the result is
/// at most `max_len` bytes.
pub fn mutate(input: &[u8], others: &[Vec<u8>], rng: &mut Rng, max_len: usize) -> Vec<u8> {
    let mut data = input.to_vec();
    for _ in 0..=rng.below(4) {
        mutate_once(&mut data, others, rng);
    }
    data.truncate(max_len);
    data
}

fn mutate_once(data: &mut Vec<u8>, others: &[Vec<u8>], rng: &mut Rng) {
    let at = rng.below(data.len() + 1);
    match rng.below(9) {
        0 if !data.is_empty() => {
            let i = rng.below(data.len());
            data[i] ^= 1 << rng.below(8);
        }
        1 if !data.is_empty() => {
            let i = rng.below(data.len());
            data[i] = INTERESTING[rng.below(INTERESTING.len())];
        }
        2 | 3 => {
            let token = DICTIONARY[rng.below(DICTIONARY.len())];
            data.splice(at..at, token.bytes());
        }
        4 if !data.is_empty() => {
            let start = rng.below(data.len());
            let end = (start + 1 + rng.below(16)).min(data.len());
            data.drain(start..end);
        }
        5 if !data.is_empty() => {
            let start = rng.below(data.len());
            let end = (start + 1 + rng.below(32)).min(data.len());
            let chunk = data[start..end].to_vec();
            data.splice(at..at, chunk);
        }
        6 if !others.is_empty() => {
            let other = &others[rng.below(others.len())];
            let from = rng.below(other.len() + 1);
            data.truncate(at);
            data.extend_from_slice(&other[from..]);
        }
        7 => {
            let depth = 1 + rng.below(200);
            let open = if rng.below(2) == 0 { "(" } else { "ARRAY[" };
            data.splice(at..at, open.repeat(depth).into_bytes());
        }
        _ => data.truncate(at),
    }
}

/// [`DICTIONARY`] in libFuzzer's dictionary format (one quoted token a line, with
/// `\\`, `\"` and `\xNN` escapes).
pub fn dictionary_file() -> String {
    let mut out = String::from(
        "# Generated from pgshift_fuzz::mutate::DICTIONARY; a test keeps them equal.\n",
    );
    for token in DICTIONARY {
        out.push('"');
        for byte in token.bytes() {
            match byte {
                b'\\' => out.push_str("\\\\"),
                b'"' => out.push_str("\\\""),
                0x20..=0x7e => out.push(char::from(byte)),
                _ => out.push_str(&format!("\\x{byte:02X}")),
            }
        }
        out.push_str("\"\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_repeatable_from_the_seed() {
        let corpus = vec![b"SELECT 1".to_vec()];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50)
                .map(|_| mutate(b"CREATE INDEX i ON t (a)", &corpus, &mut rng, 4096))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn mutations_respect_the_length_limit() {
        let mut rng = Rng::new(1);
        for _ in 0..500 {
            assert!(mutate(&[b'x'; 100], &[], &mut rng, 64).len() <= 64);
        }
    }
}
