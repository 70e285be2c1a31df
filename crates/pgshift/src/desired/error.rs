//! Why a pull wrote nothing.

use std::path::PathBuf;

use super::layout::LayoutError;
use crate::trace::TraceError;

/// Everything that stops `pull`; nothing is written in any case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PullError {
    /// The output folder exists and is not empty.
    #[error("{} exists and is not empty: pull never overwrites; give a new folder", .0.display())]
    OutputExists(PathBuf),
    /// The live schema holds something desired state does not cover, or files that
    /// cannot be ordered.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The files, run on a throwaway cluster, did not rebuild the live schema.
    #[error(
        "the pulled files do not rebuild the live schema exactly on a throwaway cluster \
         ({count} dump lines differ; first: {first}); nothing was written"
    )]
    NotReproduced {
        /// Lines present on one side only.
        count: usize,
        /// The first of them, marked `live:` or `files:`.
        first: String,
    },
    /// The desired files (of `fmt`) did not run on the throwaway cluster.
    #[error("the desired files did not run on a throwaway cluster: {0}")]
    DesiredDidNotRun(String),
    /// The files did not run on the throwaway cluster.
    #[error("the pulled files failed on a throwaway cluster, so nothing was written: {0}")]
    DidNotRun(String),
    /// Reading the live schema or running the throwaway cluster failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Writing the files failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The path.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
}

impl PullError {
    /// Whether pgshift declined (the live schema or the output folder is the
    /// reason), as opposed to failing to read, run or write.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            PullError::OutputExists(_)
                | PullError::Layout(_)
                | PullError::NotReproduced { .. }
                | PullError::DidNotRun(_)
        )
    }
}
