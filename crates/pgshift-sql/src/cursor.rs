//! The grammar's error cursor, which the `pg_query` crate does not pass on.
//!
//! libpg_query reports where parsing stopped (`cursorpos`, 1-based, in characters);
//! the Rust wrapper keeps only the message. This module asks the same library again,
//! through its C entry point, only after a parse has already failed.

use std::ffi::{c_char, c_int, CString};

use crate::lines::byte_offset_of_char;

/// Mirror of libpg_query's `PgQueryError`.
#[repr(C)]
struct PgQueryError {
    message: *mut c_char,
    funcname: *mut c_char,
    filename: *mut c_char,
    lineno: c_int,
    cursorpos: c_int,
    context: *mut c_char,
}

/// Mirror of libpg_query's `PgQueryParseResult`.
#[repr(C)]
struct PgQueryParseResult {
    parse_tree: *mut c_char,
    stderr_buffer: *mut c_char,
    error: *mut PgQueryError,
}

extern "C" {
    fn pg_query_parse(input: *const c_char) -> PgQueryParseResult;
    fn pg_query_free_parse_result(result: PgQueryParseResult);
}

/// Byte offset at which the grammar rejected `text`, if it rejects it and says where.
pub(crate) fn error_offset(text: &str) -> Option<usize> {
    let input = CString::new(text).ok()?;
    // SAFETY: `input` is a valid NUL-terminated string that outlives the call; the
    // result is read only through its documented fields and freed exactly once with
    // the library's own function.
    let cursor = unsafe {
        let result = pg_query_parse(input.as_ptr());
        let cursor = if result.error.is_null() {
            0
        } else {
            (*result.error).cursorpos
        };
        pg_query_free_parse_result(result);
        cursor
    };
    let chars = usize::try_from(cursor).ok().filter(|&c| c > 0)? - 1;
    Some(byte_offset_of_char(text, chars))
}
