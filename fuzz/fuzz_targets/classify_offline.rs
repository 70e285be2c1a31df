//! cargo-fuzz binary of the `classify_offline` target; the target itself is
//! `pgshift_fuzz::targets::classify::classify_offline`, shared with the stable replay harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pgshift_fuzz::targets::classify::classify_offline(data));
