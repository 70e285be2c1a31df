//! pgshift's stand-in for `bindgen` in the build script of `pg_query`.
//!
//! `pg_query`'s build script asks bindgen for the Rust declarations of one C header,
//! `pg_query.h`. Running the real bindgen needs libclang on the build machine. The header
//! changes only when `pg_query` does, so the declarations were generated once with the
//! real bindgen 0.66.1 and are kept in `pregenerated/`. This crate offers the three calls
//! that build script makes (`Builder::default().header(..).generate()`, then
//! `write_to_file`) and writes the kept declarations, after checking that the header is
//! byte for byte the one they were generated from and that the target is one they were
//! generated for. Anything else is an error naming `scripts/regen-bindings`, never a guess.

use std::fmt;
use std::io;
use std::path::Path;

/// One set of kept declarations: the target they were generated for, the header's
/// fingerprint, and the text bindgen wrote.
struct Kept {
    target: &'static str,
    header_fnv64: u64,
    header_len: usize,
    text: &'static str,
}

const KEPT: &[Kept] = &[Kept {
    target: "x86_64-unknown-linux-gnu",
    header_fnv64: 0x26ff_b91b_61b0_c085,
    header_len: 7986,
    text: include_str!("../pregenerated/x86_64-unknown-linux-gnu.rs"),
}];

/// 64-bit FNV-1a: enough to notice that a header is not the one the declarations came
/// from (this guards against a mistake, not an adversary).
pub fn fnv64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The subset of bindgen's builder that `pg_query`'s build script uses.
#[derive(Debug, Default)]
pub struct Builder {
    header: Option<String>,
}

impl Builder {
    /// The header whose declarations are wanted.
    pub fn header<T: Into<String>>(mut self, header: T) -> Builder {
        self.header = Some(header.into());
        self
    }

    /// Finds the kept declarations for this header and target.
    pub fn generate(self) -> Result<Bindings, BindgenError> {
        let header = self.header.ok_or(BindgenError::NoHeader)?;
        let bytes = std::fs::read(&header).map_err(|e| BindgenError::Read {
            header: header.clone(),
            reason: e.to_string(),
        })?;
        let target = std::env::var("TARGET").unwrap_or_default();
        let fingerprint = fnv64(&bytes);
        let kept = KEPT.iter().find(|k| k.target == target).ok_or_else(|| {
            BindgenError::UnknownTarget {
                target: target.clone(),
            }
        })?;
        if kept.header_fnv64 != fingerprint || kept.header_len != bytes.len() {
            return Err(BindgenError::HeaderChanged {
                header,
                fingerprint,
                len: bytes.len(),
            });
        }
        Ok(Bindings { text: kept.text })
    }
}

/// Declarations ready to be written where the build script wants them.
#[derive(Debug)]
pub struct Bindings {
    text: &'static str,
}

impl Bindings {
    /// Writes the declarations to `path`.
    pub fn write_to_file<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        std::fs::write(path, self.text)
    }
}

impl fmt::Display for Bindings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

/// Why no declarations could be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindgenError {
    NoHeader,
    Read {
        header: String,
        reason: String,
    },
    UnknownTarget {
        target: String,
    },
    HeaderChanged {
        header: String,
        fingerprint: u64,
        len: usize,
    },
}

impl fmt::Display for BindgenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindgenError::NoHeader => f.write_str("no header was given"),
            BindgenError::Read { header, reason } => write!(f, "cannot read {header}: {reason}"),
            BindgenError::UnknownTarget { target } => write!(
                f,
                "pgshift keeps pg_query's bindings for {} only, not for {target:?}; \
                 generate them with scripts/regen-bindings --target {target} (needs libclang)",
                KEPT.iter().map(|k| k.target).collect::<Vec<_>>().join(", ")
            ),
            BindgenError::HeaderChanged {
                header,
                fingerprint,
                len,
            } => write!(
                f,
                "{header} ({len} bytes, fnv64 {fingerprint:#018x}) is not the header pgshift's kept \
                 bindings were generated from; run scripts/regen-bindings (needs libclang)"
            ),
        }
    }
}

impl std::error::Error for BindgenError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv64_matches_the_published_test_vectors() {
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_changed_header_is_refused_with_the_way_out() {
        let dir = std::env::temp_dir().join(format!("pgshift-bindgen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let header = dir.join("pg_query.h");
        std::fs::write(&header, b"int pg_query_parse(void);\n").unwrap();
        std::env::set_var("TARGET", "x86_64-unknown-linux-gnu");
        let err = Builder::default()
            .header(header.to_string_lossy())
            .generate()
            .unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            matches!(err, BindgenError::HeaderChanged { len: 26, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("scripts/regen-bindings"));
    }

    #[test]
    fn the_kept_text_is_what_bindgen_wrote() {
        for kept in KEPT {
            assert!(kept
                .text
                .starts_with("/* automatically generated by rust-bindgen 0.66.1 */"));
            assert!(kept.text.contains("pub fn pg_query_parse_protobuf"));
        }
    }
}
