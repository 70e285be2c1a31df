//! cargo-fuzz binary of the `connection_string` target; the target itself is
//! `pgshift_fuzz::targets::connect::connection_string`, shared with the stable replay harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pgshift_fuzz::targets::connect::connection_string(data));
