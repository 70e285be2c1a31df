//! cargo-fuzz binary of the `classify_facts` target; the target itself is
//! `pgshift_fuzz::targets::classify::classify_facts`, shared with the stable replay harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pgshift_fuzz::targets::classify::classify_facts(data));
