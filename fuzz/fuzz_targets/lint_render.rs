//! cargo-fuzz binary of the `lint_render` target; the target itself is
//! `pgshift_fuzz::targets::lint::lint_render`, shared with the stable replay harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pgshift_fuzz::targets::lint::lint_render(data));
