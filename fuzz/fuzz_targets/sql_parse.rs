//! cargo-fuzz binary of the `sql_parse` target; the target itself is
//! `pgshift_fuzz::targets::sql::sql_parse`, shared with the stable replay harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pgshift_fuzz::targets::sql::sql_parse(data));
