//! Starts a throwaway cluster (and a replica), prints how to reach them and how
//! long each step took, then stops both.
//!
//! ```text
//! cargo run -p pgshift-embedded --example start_cluster
//! PGSHIFT_PG_BIN=$(scripts/pg-versions 17 | awk '{print $2}') cargo run -p pgshift-embedded --example start_cluster
//! ```

use std::time::Instant;

use pgshift_embedded::{Cluster, ClusterOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let primary = Cluster::start(&ClusterOptions::default())?;
    let start = t.elapsed();
    println!(
        "PostgreSQL {} from {}",
        primary.version(),
        primary.bindir().display()
    );
    println!("primary:  {}", primary.connection_string("postgres"));
    println!("          {}", primary.url("postgres"));

    let t = Instant::now();
    let replica = primary.add_replica()?;
    let replica_start = t.elapsed();
    println!("replica:  {}", replica.connection_string("postgres"));

    let t = Instant::now();
    replica.stop()?;
    primary.stop()?;
    println!(
        "primary start {start:.2?}, replica start {replica_start:.2?}, both stopped and removed in {:.2?}",
        t.elapsed()
    );
    Ok(())
}
