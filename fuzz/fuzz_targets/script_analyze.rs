//! cargo-fuzz binary of the `script_analyze` target; the target itself is
//! `pgshift_fuzz::targets::script::script_analyze`, shared with the stable replay harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pgshift_fuzz::targets::script::script_analyze(data));
