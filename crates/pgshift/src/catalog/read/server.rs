//! The server and the session the read runs in.
//!
//! This is the first statement of the transaction, so it also fixes the snapshot; it
//! checks that the transaction is what the read asked for (`repeatable read`,
//! read only).

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::ServerFacts;

const STEP: &str = "server";

const SQL: &str = "\
SELECT pg_catalog.current_setting('server_version_num') AS version_num,
       pg_catalog.current_setting('server_version') AS version,
       pg_catalog.current_setting('transaction_isolation') AS isolation,
       pg_catalog.current_setting('transaction_read_only') AS read_only,
       current_user AS role_name,
       pg_catalog.pg_my_temp_schema() AS temp_schema";

/// What the read needs to know about the server and the session.
#[derive(Debug)]
pub(crate) struct SessionFacts {
    /// The server.
    pub(crate) server: ServerFacts,
    /// `current_user`, which `$user` in a search path stands for.
    pub(super) current_user: String,
    /// The session's temporary schema, once it has one.
    pub(super) temp_schema: Option<u32>,
}

/// Reads the server facts and checks that the read owns its snapshot.
pub(crate) async fn read(client: &Client) -> Result<SessionFacts, CatalogError> {
    let rows = query(client, STEP, SQL, &[]).await?;
    let row = rows.first().ok_or(CatalogError::UnexpectedValue {
        step: STEP,
        what: "server settings row",
    })?;
    let fields = Fields::new(row, STEP);
    let isolation: String = fields.get("isolation")?;
    let read_only: String = fields.get("read_only")?;
    if isolation != "repeatable read" {
        return Err(CatalogError::UnexpectedValue {
            step: STEP,
            what: "transaction_isolation",
        });
    }
    if read_only != "on" {
        return Err(CatalogError::UnexpectedValue {
            step: STEP,
            what: "transaction_read_only",
        });
    }
    let version_num: String = fields.get("version_num")?;
    let version_num =
        version_num
            .trim()
            .parse::<i32>()
            .map_err(|_| CatalogError::UnexpectedValue {
                step: STEP,
                what: "server_version_num",
            })?;
    let temp_schema: u32 = fields.get("temp_schema")?;
    Ok(SessionFacts {
        server: ServerFacts {
            version_num,
            version: fields.get("version")?,
        },
        current_user: fields.get("role_name")?,
        temp_schema: (temp_schema != 0).then_some(temp_schema),
    })
}
