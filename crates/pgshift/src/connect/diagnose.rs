//! Why one connection attempt failed, in the server's or the operating system's own
//! words, and what to do next.
//!
//! A server's startup error keeps its severity, message, SQLSTATE, detail and hint;
//! SQLSTATE 28P01 and 28000 become [`ConnectError::AuthenticationFailed`], any other
//! [`ConnectError::ServerRefused`]. A missing password, a TLS failure (found by the
//! rustls error inside), and an operating system error (`Connection refused`, a
//! missing socket file, an unresolvable name) each get their own next step. Server
//! messages are matched by SQLSTATE first; the few finer hints that need the message
//! itself (a missing role versus a missing `pg_hba.conf` line, both 28000) fall back
//! to a general one when the server speaks another language. No message carries the
//! password: neither the server nor the operating system ever repeats it.

use std::fmt::Write as _;
use std::io;

use tokio_postgres::error::{DbError, SqlState};

use super::dsn::{passfile_host, ConnectionSpec, PasswordOrigin};
use super::error::ConnectError;
use super::target::{Host, Target};

/// Maps a driver error from connecting to `target` to the typed error.
pub(crate) fn classify(
    error: tokio_postgres::Error,
    spec: &ConnectionSpec,
    target: &Target,
) -> ConnectError {
    let endpoint = target.to_string();
    if let Some(db) = error.as_db_error() {
        let sqlstate = db.code().clone();
        if sqlstate == SqlState::INVALID_PASSWORD
            || sqlstate == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            let next = authentication_next(db, spec, target);
            return ConnectError::AuthenticationFailed {
                endpoint,
                user: spec.user().to_owned(),
                sqlstate,
                next,
                source: error,
            };
        }
        let next = refusal_next(db, spec, target);
        return ConnectError::ServerRefused {
            endpoint,
            sqlstate,
            next,
            source: error,
        };
    }
    if is_password_missing(&error) {
        return ConnectError::PasswordMissing {
            endpoint,
            user: spec.user().to_owned(),
            next: password_missing_next(spec, target),
        };
    }
    if let Some(tls_error) = rustls_cause(&error) {
        return ConnectError::TlsHandshake {
            endpoint,
            next: tls_next(tls_error).to_owned(),
            source: tls_error.clone(),
        };
    }
    let (reason, next) = match io_cause(&error) {
        Some(io_error) => (io_error.to_string(), os_next(io_error, target)),
        None => (chain_text(&error), driver_next(&error)),
    };
    ConnectError::ConnectionFailed {
        endpoint,
        reason,
        next,
        source: error,
    }
}

/// The next step after a rejected role or password.
fn authentication_next(db: &DbError, spec: &ConnectionSpec, target: &Target) -> String {
    let user = spec.user();
    let message = db.message();
    if *db.code() == SqlState::INVALID_PASSWORD {
        return match spec.password_origin(target) {
            Some(PasswordOrigin::Passfile) => format!(
                "check the password for {} in the password file (PGPASSFILE, else ~/.pgpass)",
                passfile_key(spec, target)
            ),
            _ => "check the password given in the connection string or PGPASSWORD".to_owned(),
        };
    }
    if message.contains("pg_hba.conf") {
        return "the server's pg_hba.conf has no line that lets this host, user and database \
                in (with or without TLS); add one and reload the server, or connect the way a \
                line allows (sslmode=require for hostssl lines)"
            .to_owned();
    }
    if message.starts_with("role ") && message.ends_with(" does not exist") {
        return format!(
            "create the role (CREATE ROLE {} LOGIN, or `createuser{} {}`) or connect as an \
             existing one (user= in the connection string, or PGUSER)",
            quote_ident(user),
            tool_args(target, None),
            shell_word(user)
        );
    }
    if message.contains("not permitted to log in") {
        return format!(
            "let it log in (ALTER ROLE {} LOGIN) or connect as a role that can",
            quote_ident(user)
        );
    }
    if message.contains("certificate") {
        return "give a client certificate the server trusts (sslcert= and sslkey=), or connect \
                as a role that does not need one"
            .to_owned();
    }
    if message.starts_with("Peer authentication") || message.starts_with("Ident authentication") {
        return format!(
            "peer and ident authentication need the OS user to match the role: run as OS user \
             \"{user}\", or connect over TCP (host=localhost) with a password"
        );
    }
    "check the role name (user= or PGUSER) and the server's pg_hba.conf".to_owned()
}

/// The next step after any other startup error, by SQLSTATE.
fn refusal_next(db: &DbError, spec: &ConnectionSpec, target: &Target) -> String {
    let code = db.code();
    if *code == SqlState::INVALID_CATALOG_NAME {
        let db_name = spec.dbname();
        format!(
            "create it (`createdb{} {}`) or connect to an existing database (dbname= or the \
             URL's path, or PGDATABASE)",
            tool_args(target, Some(spec.user())),
            shell_word(db_name)
        )
    } else if *code == SqlState::CANNOT_CONNECT_NOW {
        "the server is starting up, shutting down or in recovery without hot standby; wait \
         and try again"
            .to_owned()
    } else if *code == SqlState::TOO_MANY_CONNECTIONS {
        "every connection slot is taken (max_connections, or the role's or database's \
         CONNECTION LIMIT); close idle sessions or try again later"
            .to_owned()
    } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
        format!(
            "grant it (GRANT CONNECT ON DATABASE {} TO {}) or connect as a role that has it",
            quote_ident(spec.dbname()),
            quote_ident(spec.user())
        )
    } else if *code == SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE {
        "the database does not accept connections now (ALLOW_CONNECTIONS false); connect to \
         another one"
            .to_owned()
    } else {
        "see the server's log for more".to_owned()
    }
}

fn password_missing_next(spec: &ConnectionSpec, target: &Target) -> String {
    format!(
        "set PGPASSWORD, add the line `{}:<password>` to ~/.pgpass (mode 0600; PGPASSFILE names \
         another file), or put it in the URL (postgresql://{}:<password>@…)",
        passfile_key(spec, target),
        spec.user()
    )
}

/// `host:port:dbname:user` as a password file line starts for `target`, with `:` and
/// `\` escaped as the file format wants.
fn passfile_key(spec: &ConnectionSpec, target: &Target) -> String {
    let escape = |text: &str| text.replace('\\', "\\\\").replace(':', "\\:");
    format!(
        "{}:{}:{}:{}",
        escape(&passfile_host(target)),
        target.port(),
        escape(spec.dbname()),
        escape(spec.user())
    )
}

/// ` -h HOST -p PORT [-U USER]` for PostgreSQL's client programs.
fn tool_args(target: &Target, user: Option<&str>) -> String {
    let host = match (target.host(), target.hostaddr()) {
        (Some(Host::Unix(dir)), _) => Some(dir.to_string_lossy().into_owned()),
        (Some(Host::Tcp(name)), _) => Some(name.clone()),
        (None, Some(addr)) => Some(addr.to_string()),
        (None, None) => None,
    };
    let mut text = String::new();
    if let Some(host) = host {
        let _ = write!(text, " -h {}", shell_word(&host));
    }
    let _ = write!(text, " -p {}", target.port());
    if let Some(user) = user {
        let _ = write!(text, " -U {}", shell_word(user));
    }
    text
}

/// The next step after an operating system error.
fn os_next(error: &io::Error, target: &Target) -> String {
    let port = target.port();
    if let Some(dir) = target.socket_dir() {
        return match error.kind() {
            io::ErrorKind::NotFound => format!(
                "is the server running locally, with its socket in {}? (host= names the socket \
                 directory, port= the number in .s.PGSQL.{port})",
                dir.display()
            ),
            io::ErrorKind::PermissionDenied => {
                "this OS user may not open that socket; check the permissions of its directory"
                    .to_owned()
            }
            _ => {
                "is the server running locally and accepting connections on that socket?".to_owned()
            }
        };
    }
    match error.kind() {
        io::ErrorKind::ConnectionRefused => {
            format!(
                "is the server running on that host and accepting TCP connections on port {port}?"
            )
        }
        io::ErrorKind::TimedOut => {
            "the host did not answer; is the address right, and is the port open (firewall)?"
                .to_owned()
        }
        io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
            "this machine has no route to that host; check the address and the network".to_owned()
        }
        _ if error.to_string().contains("lookup address") => {
            "check the host name (host= or PGHOST): it could not be resolved".to_owned()
        }
        _ => "check host= and port= (or PGHOST and PGPORT)".to_owned(),
    }
}

/// The next step after a driver error that is neither the server's nor the OS's.
fn driver_next(error: &tokio_postgres::Error) -> String {
    let text = chain_text(error);
    if text.contains("server does not support TLS") {
        "the server does not offer TLS (ssl = off); connect with sslmode=prefer or \
         sslmode=disable, or turn ssl on in the server"
            .to_owned()
    } else if text.contains("unexpected message") || text.contains("error parsing response") {
        "is that port a PostgreSQL server?".to_owned()
    } else if error.is_closed() {
        "the server closed the connection during startup; see its log".to_owned()
    } else {
        "check the connection parameters".to_owned()
    }
}

/// The next step after a failed TLS handshake, by rustls's reason.
fn tls_next(error: &rustls::Error) -> &'static str {
    use rustls::CertificateError as Cert;
    match error {
        rustls::Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => {
            "the server's certificate is not signed by a trusted root; point sslrootcert= at \
             the certificate of the CA that signed it"
        }
        rustls::Error::InvalidCertificate(
            Cert::NotValidForName | Cert::NotValidForNameContext { .. },
        ) => {
            "the server's certificate does not name this host; connect by a name it lists, or \
             use sslmode=verify-ca to check the chain only"
        }
        rustls::Error::InvalidCertificate(
            Cert::Expired | Cert::ExpiredContext { .. } | Cert::NotValidYet,
        )
        | rustls::Error::InvalidCertificate(Cert::NotValidYetContext { .. }) => {
            "the server's certificate is outside its validity period (or this machine's clock \
             is wrong)"
        }
        rustls::Error::AlertReceived(_) => {
            "the server refused the handshake; does it want a client certificate (sslcert=, \
             sslkey=)?"
        }
        _ => "check sslmode, sslrootcert, sslcert and sslkey",
    }
}

/// tokio-postgres reports a password the server asked for and did not get as a
/// configuration error, `password missing`.
fn is_password_missing(error: &tokio_postgres::Error) -> bool {
    std::error::Error::source(error).is_some_and(|cause| cause.to_string() == "password missing")
}

/// The error and its causes, joined by `: `.
fn chain_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut current = error.source();
    while let Some(cause) = current {
        let _ = write!(text, ": {cause}");
        current = cause.source();
    }
    text
}

/// The `io::Error` in `error`'s source chain.
fn io_cause<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a io::Error> {
    let mut current = Some(error);
    while let Some(link) = current {
        if let Some(found) = link.downcast_ref::<io::Error>() {
            return Some(found);
        }
        current = link.source();
    }
    None
}

/// The rustls error in `error`'s source chain, looking inside `io::Error`s (whose
/// `source` skips the error they wrap).
pub(crate) fn rustls_cause<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::Error> {
    const MAX_DEPTH: usize = 16;
    let mut current = Some(error);
    for _ in 0..MAX_DEPTH {
        let link = current?;
        if let Some(found) = link.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        let wrapped = link
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if wrapped.is_some() {
            return wrapped;
        }
        current = link.source();
    }
    None
}

/// An SQL identifier as written in a suggested statement: bare when it is a plain
/// lowercase name, double-quoted otherwise.
fn quote_ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// A word for a POSIX shell: as is when plain, single-quoted otherwise.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=,@%:".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_errors_are_found_inside_io_errors() {
        let io = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(
            rustls_cause(&io),
            Some(&rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer
            ))
        );
        let plain = io::Error::other("refused");
        assert_eq!(rustls_cause(&plain), None);
    }

    #[test]
    fn each_certificate_problem_has_its_own_next_step() {
        use rustls::CertificateError as Cert;
        let hint = |e: Cert| tls_next(&rustls::Error::InvalidCertificate(e));
        assert!(hint(Cert::UnknownIssuer).contains("sslrootcert="));
        assert!(hint(Cert::NotValidForName).contains("verify-ca"));
        assert!(hint(Cert::Expired).contains("validity period"));
        assert!(tls_next(&rustls::Error::General("x".into())).starts_with("check sslmode"));
    }

    #[test]
    fn suggested_commands_quote_what_needs_it() {
        assert_eq!(quote_ident("app_db1"), "app_db1");
        assert_eq!(quote_ident("App"), "\"App\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(shell_word("/tmp/pg-1/sock"), "/tmp/pg-1/sock");
        assert_eq!(shell_word("my db"), "'my db'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
        let socket = Target::new(Some(Host::from_text("/run/pg")), None, 5433);
        assert_eq!(
            tool_args(&socket, Some("app")),
            " -h /run/pg -p 5433 -U app"
        );
        let v6 = Target::new(Some(Host::from_text("::1")), None, 5432);
        assert_eq!(tool_args(&v6, None), " -h ::1 -p 5432");
    }
}
