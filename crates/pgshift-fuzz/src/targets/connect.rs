//! `connection_string`: the connection-string front door (`--url`, `DATABASE_URL`):
//! libpq URLs and `key=value` strings, the `PG*` environment and the password file.
//!
//! The bytes are `connection string \0 environment \0 password file`. The environment
//! is `NAME=value` lines, injected (nothing is read from the process); `HOME` is a
//! scratch directory and `PGPASSFILE` a file there holding the third part (mode 0600)
//! followed by a catch-all line with a known password. When the environment sets no
//! `PGPASSWORD`, it gets a known one too. Neither known password may appear in
//! anything a spec or an error shows.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use pgshift::connect::{ConnectionSpec, Environment};

use crate::input::{split_nul, within_limit};
use crate::scratch::with_empty_dir;

/// The password put in `PGPASSWORD` when the input sets none.
const ENV_SECRET: &str = "env-Secret-7q2";
/// The password of the password file's catch-all line.
const PASSFILE_SECRET: &str = "file-Secret-4k9";

/// An environment made of the input's lines.
struct FuzzEnv {
    vars: BTreeMap<String, String>,
    home: PathBuf,
}

impl Environment for FuzzEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    fn os_user(&self) -> Option<String> {
        Some(
            self.vars
                .get("USER")
                .cloned()
                .unwrap_or_else(|| "fuzzer".to_owned()),
        )
    }

    fn home_dir(&self) -> Option<PathBuf> {
        Some(self.home.clone())
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.starts_with(&self.home) && path.is_dir()
    }

    fn is_file(&self, path: &Path) -> bool {
        path.starts_with(&self.home) && path.is_file()
    }
}

/// Runs one input.
pub fn connection_string(data: &[u8]) {
    if !within_limit(data) {
        return;
    }
    let [conn, env, passfile] = split_nul(data, 3)[..] else {
        return;
    };
    let Ok(conn) = std::str::from_utf8(conn) else {
        return;
    };
    let env_text = String::from_utf8_lossy(env);
    with_empty_dir(|home| {
        let passfile_path = home.join("pgpass");
        let mut contents = passfile.to_vec();
        contents.extend_from_slice(format!("\n*:*:*:*:{PASSFILE_SECRET}\n").as_bytes());
        std::fs::write(&passfile_path, contents).expect("the password file is written");
        std::fs::set_permissions(&passfile_path, std::fs::Permissions::from_mode(0o600))
            .expect("the password file is private");
        let mut vars: BTreeMap<String, String> = env_text
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect();
        vars.entry("PGPASSWORD".to_owned())
            .or_insert_with(|| ENV_SECRET.to_owned());
        vars.insert("PGPASSFILE".to_owned(), passfile_path.display().to_string());
        let env = FuzzEnv {
            vars,
            home: home.to_path_buf(),
        };
        let secrets: Vec<&str> = [ENV_SECRET, PASSFILE_SECRET]
            .into_iter()
            .filter(|secret| !conn.contains(secret) && !env_text.contains(secret))
            .collect();
        check(conn, &env, &secrets);
    });
}

/// Whatever the outcome, nothing shown carries a known password, and parsing twice
/// gives the same answer.
fn check(conn: &str, env: &FuzzEnv, secrets: &[&str]) {
    let shown = match ConnectionSpec::parse_with_env(conn, env) {
        Ok(spec) => {
            assert!(!spec.targets().is_empty(), "a spec has a server to try");
            let again = ConnectionSpec::parse_with_env(conn, env).expect("parsing is repeatable");
            assert_eq!(spec.redacted(), again.redacted());
            let _ = (spec.user(), spec.dbname(), spec.tls(), spec.options());
            let _ = (spec.connect_timeout(), spec.target_session_attrs());
            format!("{}\n{spec:?}\n{spec}", spec.redacted())
        }
        Err(err) => format!("{err}\n{err:?}"),
    };
    for secret in secrets {
        assert!(!shown.contains(secret), "a password is shown: {shown}");
    }
}
