//! cargo-fuzz binary of the `migrations_dir` target; the target itself is
//! `pgshift_fuzz::targets::migrations::migrations_dir`, shared with the stable replay harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pgshift_fuzz::targets::migrations::migrations_dir(data));
