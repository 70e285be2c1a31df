//! A column value of any type, kept in the server's binary form and bound back as
//! such: the reader's cursor needs no Rust type for `id`.

use std::error::Error as StdError;

use bytes::BytesMut;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};

/// The binary form of one non-NULL value, of whatever type the server said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RawValue(pub Vec<u8>);

impl<'a> FromSql<'a> for RawValue {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(RawValue(raw.to_vec()))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

impl ToSql for RawValue {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    // The value is bound to the parameter it was read for: the same type.
    fn accepts(_ty: &Type) -> bool {
        true
    }

    to_sql_checked!();
}
