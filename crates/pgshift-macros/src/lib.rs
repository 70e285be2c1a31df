//! `embed_migrations!`: a migrations directory embedded in the binary at compile
//! time, for [`pgshift::Migrator`](https://docs.rs/pgshift). Use it through
//! `pgshift::embed_migrations!`; this crate only lists the directory.
//!
//! The macro walks the directory tree (relative to the calling crate's
//! `CARGO_MANIFEST_DIR`), in name order, and expands to a
//! `pgshift::embed::EmbeddedMigrations` constant holding every file's path relative
//! to the directory and its bytes through `include_bytes!` (so that cargo rebuilds
//! when a file changes), and every folder. At run time the engine reads that tree as
//! it reads the directory on disk: the same layout detection, the same files.
//!
//! Cargo does not rebuild when a file is *added* to the directory (stable proc macros
//! cannot tell it to); a build script with
//! `println!("cargo:rerun-if-changed=migrations");` makes it.
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, LitStr};

/// Embeds a migrations directory: `pgshift::embed_migrations!("migrations")`, the
/// path relative to the crate's `Cargo.toml`. Expands to a constant expression of type
/// `pgshift::embed::EmbeddedMigrations`.
#[proc_macro]
pub fn embed_migrations(input: TokenStream) -> TokenStream {
    let literal = parse_macro_input!(input as LitStr);
    match expand(&literal) {
        Ok(tokens) => tokens.into(),
        Err(message) => syn::Error::new(literal.span(), message)
            .to_compile_error()
            .into(),
    }
}

fn expand(literal: &LitStr) -> Result<proc_macro2::TokenStream, String> {
    let given = literal.value();
    let manifest = std::env::var("CARGO_MANIFEST_DIR").map_err(|_| {
        "CARGO_MANIFEST_DIR is not set: embed_migrations! runs under cargo".to_owned()
    })?;
    let root = Path::new(&manifest).join(&given);
    if !root.is_dir() {
        return Err(format!(
            "{}: not a directory (embed_migrations! takes a path relative to {manifest})",
            root.display()
        ));
    }
    let mut files = Vec::new();
    let mut folders = Vec::new();
    walk(&root, Path::new(""), &mut files, &mut folders)?;
    let files = files.iter().map(|(relative, absolute)| {
        let absolute = absolute.to_string_lossy().into_owned();
        quote! { ::pgshift::embed::EmbeddedFile::__new(#relative, include_bytes!(#absolute)) }
    });
    Ok(quote! {
        ::pgshift::embed::EmbeddedMigrations::__new(#given, &[#(#files),*], &[#(#folders),*])
    })
}

/// Every file (relative path with `/`, absolute path) and folder (relative path)
/// under `dir`, in name order.
fn walk(
    dir: &Path,
    relative: &Path,
    files: &mut Vec<(String, PathBuf)>,
    folders: &mut Vec<String>,
) -> Result<(), String> {
    let read = |err: std::io::Error| format!("{}: {err}", dir.display());
    let mut entries = std::fs::read_dir(dir)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(format!(
                "{}: a file name that is not UTF-8 cannot be embedded",
                entry.path().display()
            ));
        };
        let path = entry.path();
        let inner = relative.join(name);
        let shown = inner
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        // Symbolic links are followed, as the engine's reading of a directory does.
        let meta = std::fs::metadata(&path).map_err(|err| format!("{}: {err}", path.display()))?;
        if meta.is_dir() {
            folders.push(shown);
            walk(&path, &inner, files, folders)?;
        } else if meta.is_file() {
            files.push((shown, path));
        }
    }
    Ok(())
}
