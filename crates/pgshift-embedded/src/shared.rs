//! One cluster shared by all tests of a test binary.
//!
//! [`shared_cluster`] starts it on first use; tests then take a database each
//! with [`Cluster::fresh_database`]. Statics are never dropped, so the cluster
//! is stopped and removed by a `libc::atexit` hook when the process exits
//! normally; if it is killed, the parent-death signal stops the server and the
//! next cluster creation sweeps the directory.

use std::sync::{Mutex, OnceLock};

use crate::cluster::{Cluster, ClusterOptions};
use crate::error::Result;

static SHARED: OnceLock<Cluster> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());

/// The process-wide shared cluster, started (with default options) on the
/// first call. A failed start is returned to the caller and retried by the
/// next call.
///
/// ```no_run
/// # fn main() -> Result<(), pgshift_embedded::Error> {
/// let cluster = pgshift_embedded::shared_cluster()?;
/// let db = cluster.fresh_database("my_test")?;
/// let conninfo = cluster.connection_string(&db);
/// # let _ = conninfo; Ok(()) }
/// ```
pub fn shared_cluster() -> Result<&'static Cluster> {
    if let Some(cluster) = SHARED.get() {
        return Ok(cluster);
    }
    let _guard = INIT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(cluster) = SHARED.get() {
        return Ok(cluster);
    }
    let cluster = Cluster::start(&ClusterOptions::default())?;
    let cluster = SHARED.get_or_init(|| cluster);
    // SAFETY: registering a plain `extern "C"` function with no captured state.
    // A failed registration only means cleanup is left to PDEATHSIG and the sweep.
    let _ = unsafe { libc::atexit(stop_shared_at_exit) };
    Ok(cluster)
}

extern "C" fn stop_shared_at_exit() {
    if let Some(cluster) = SHARED.get() {
        // Never unwind across the C boundary.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cluster.shutdown()));
    }
}
