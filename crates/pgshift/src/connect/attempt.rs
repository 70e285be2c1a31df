//! Reaching a server: the host list is walked in order (twice for
//! `prefer-standby`), each attempt bounded by the connect timeout, and the first
//! server that accepts the connection, the credentials and `target_session_attrs`
//! is handed to [`super::session`] to be prepared.
//!
//! Driver errors become typed errors in [`super::diagnose`], with the server's or
//! the operating system's words and the next step.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::{AsyncMessage, Client, Connection, NoTls, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::affinity;
use super::budgets::SessionBudgets;
use super::diagnose;
use super::dsn::ConnectionSpec;
use super::error::ConnectError;
use super::session::{prepare, Session, APPLICATION_NAME};
use super::target::{Host, Target, TargetSessionAttrs};
use super::tls;

/// The connect timeout when the connection string sets none.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to the first acceptable server of `spec` and prepares the session under
/// `budgets`.
///
/// Servers are tried in order (twice for `prefer-standby`: standbys first); a server
/// that fails to connect, authenticate or match `target_session_attrs` is skipped.
/// Once one accepts, the connection is checked for a server session of its own
/// (`affinity`: refused behind a pooler in transaction or statement mode, before
/// anything is set), and a refusal or a failure to prepare its session is returned
/// as is.
pub async fn connect(
    spec: &ConnectionSpec,
    budgets: &SessionBudgets,
) -> Result<Session, ConnectError> {
    budgets.validate()?;
    let needs_tls = spec.targets().iter().any(|target| !target.is_unix_socket());
    let tls = if needs_tls {
        tls::connector(spec.tls())?
    } else {
        None
    };
    let timeout = spec.connect_timeout().unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    let mut attempts = Vec::new();
    for &wanted in spec.target_session_attrs().passes() {
        for target in spec.targets() {
            match open(spec, target, tls.as_ref(), wanted, timeout).await {
                Ok(client) => {
                    let endpoint = target.to_string();
                    // INV: SE-4 — a connection without a server session of its own is
                    // refused before anything is set or taken on it. Boxed: the check
                    // holds a second connection attempt, and every future that opens a
                    // session would otherwise carry it on the stack.
                    Box::pin(affinity::check(&client, &endpoint, timeout, || {
                        open(spec, target, tls.as_ref(), TargetSessionAttrs::Any, timeout)
                    }))
                    .await?;
                    return prepare(client, endpoint, budgets, timeout).await;
                }
                Err(error) => attempts.push(error),
            }
        }
    }
    Err(match attempts.len() {
        1 => attempts.remove(0),
        _ => ConnectError::AllHostsFailed { attempts },
    })
}

/// One bounded connection attempt, including the `target_session_attrs` check.
async fn open(
    spec: &ConnectionSpec,
    target: &Target,
    tls: Option<&MakeRustlsConnect>,
    wanted: TargetSessionAttrs,
    timeout: Duration,
) -> Result<Client, ConnectError> {
    let endpoint = target.to_string();
    let config = driver_config(spec, target, timeout);
    let attempt = async {
        let connected = match tls {
            Some(tls) if !target.is_unix_socket() => {
                config.connect(tls.clone()).await.map(spawn_connection)
            }
            _ => config.connect(NoTls).await.map(spawn_connection),
        };
        let client = connected.map_err(|error| diagnose::classify(error, spec, target))?;
        check_session_attrs(&client, wanted, &endpoint).await?;
        Ok(client)
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .map_err(|_| ConnectError::timeout(&endpoint, "connect", timeout))?
}

/// The driver configuration for one target. TLS is never negotiated over Unix
/// sockets.
fn driver_config(
    spec: &ConnectionSpec,
    target: &Target,
    timeout: Duration,
) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .user(spec.user())
        .dbname(spec.dbname())
        .application_name(APPLICATION_NAME)
        .connect_timeout(timeout)
        .port(target.port());
    if let Some(password) = spec.password_for(target) {
        config.password(password);
    }
    if let Some(options) = spec.options() {
        config.options(options);
    }
    match (target.socket_dir(), target.tls_name()) {
        (Some(dir), _) => {
            config.host_path(dir);
        }
        (None, Some(name)) => {
            config.host(name);
            // With both, the driver connects to the address and verifies the name.
            if let (Some(Host::Tcp(_)), Some(addr)) = (target.host(), target.hostaddr()) {
                config.hostaddr(addr);
            }
        }
        (None, None) => {
            config.host("localhost");
        }
    }
    let mode = if target.is_unix_socket() {
        tokio_postgres::config::SslMode::Disable
    } else {
        spec.tls().mode().negotiation()
    };
    config.ssl_mode(mode);
    config
}

/// Runs the connection in its own task; it ends when the client is dropped. Notices
/// go to [`super::notices::deliver`].
fn spawn_connection<T>((client, mut connection): (Client, Connection<Socket, T>)) -> Client
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notice(notice))) => {
                    super::notices::deliver(notice.message());
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::warn!(error = %error, "postgres connection ended with an error");
                    break;
                }
                None => break,
            }
        }
    });
    client
}

/// Checks the server against `target_session_attrs`, as libpq does after connecting
/// (through the simple query protocol, like libpq).
async fn check_session_attrs(
    client: &Client,
    wanted: TargetSessionAttrs,
    endpoint: &str,
) -> Result<(), ConnectError> {
    let step = "target_session_attrs";
    let matches = match wanted {
        TargetSessionAttrs::ReadWrite | TargetSessionAttrs::ReadOnly => {
            let read_only = simple_value(
                client,
                "SELECT pg_catalog.current_setting('transaction_read_only')",
                step,
            )
            .await?;
            (read_only == "on") == (wanted == TargetSessionAttrs::ReadOnly)
        }
        TargetSessionAttrs::Primary | TargetSessionAttrs::Standby => {
            let in_recovery =
                simple_value(client, "SELECT pg_catalog.pg_is_in_recovery()", step).await? == "t";
            in_recovery == (wanted == TargetSessionAttrs::Standby)
        }
        _ => true,
    };
    if matches {
        Ok(())
    } else {
        Err(ConnectError::SessionAttrsMismatch {
            endpoint: endpoint.to_owned(),
            wanted: wanted.as_str(),
        })
    }
}

/// The one value `sql` returns, read through the simple query protocol: the check
/// runs before the session is known to be its own (`affinity`), so it must leave no
/// named prepared statement on a server backend a pooler may share.
async fn simple_value(
    client: &Client,
    sql: &str,
    step: &'static str,
) -> Result<String, ConnectError> {
    let messages = client
        .simple_query(sql)
        .await
        .map_err(|error| ConnectError::setup(step, error))?;
    messages
        .iter()
        .find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .ok_or(ConnectError::UnexpectedServerValue { what: step })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn invalid_budgets_are_refused_before_connecting() {
        let spec = ConnectionSpec::parse_with_env(
            "host=192.0.2.1 user=u connect_timeout=2",
            &crate::connect::testing::FakeEnv::new("u"),
        )
        .expect("parses");
        let budgets = SessionBudgets {
            lock_timeout_ms: 0,
            ..SessionBudgets::READ_ONLY_PLAN
        };
        let error = connect(&spec, &budgets).await.expect_err("zero budget");
        assert!(matches!(
            error,
            ConnectError::InvalidBudget {
                field: "lock_timeout_ms",
                ..
            }
        ));
    }

    fn spec(text: &str) -> ConnectionSpec {
        ConnectionSpec::parse_with_env(text, &crate::connect::testing::FakeEnv::new("u"))
            .expect("parses")
    }

    #[tokio::test]
    async fn every_refused_host_is_reported_in_order() {
        let spec = spec("host=127.0.0.1,::1 port=1 user=u sslmode=disable connect_timeout=2");
        let error = connect(&spec, &SessionBudgets::READ_ONLY_PLAN)
            .await
            .expect_err("nothing listens on port 1");
        let message = error.to_string();
        assert!(
            message.starts_with(
                "all 2 connection attempts failed: could not connect to 127.0.0.1:1: "
            ),
            "{message}"
        );
        assert!(
            message.contains("; could not connect to [::1]:1"),
            "{message}"
        );
        let ConnectError::AllHostsFailed { attempts } = error else {
            panic!("expected one error per host, got {error:?}");
        };
        let endpoints: Vec<String> = attempts
            .iter()
            .map(|attempt| match attempt {
                ConnectError::ConnectionFailed { endpoint, .. } => endpoint.clone(),
                other => panic!("expected a failed connection, got {other:?}"),
            })
            .collect();
        assert_eq!(endpoints, vec!["127.0.0.1:1", "[::1]:1"]);
    }

    #[tokio::test]
    async fn a_silent_server_times_out_at_the_connect_timeout() {
        // The listener's backlog completes the TCP handshake, but nothing ever answers
        // the startup message.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let spec = spec(&format!(
            "host=127.0.0.1 port={port} user=u sslmode=disable connect_timeout=1"
        ));
        let error = connect(&spec, &SessionBudgets::READ_ONLY_PLAN)
            .await
            .expect_err("silent server");
        assert!(
            matches!(
                error,
                ConnectError::Timeout {
                    step: "connect",
                    timeout_ms: 2000,
                    ..
                }
            ),
            "{error:?}"
        );
        drop(listener);
    }
}
