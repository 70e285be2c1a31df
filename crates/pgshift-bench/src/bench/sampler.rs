//! A session of its own that takes a sample every so often while a run goes on and
//! hands back every sample at the end: P7's change-log backlog and P8's replay lag.

use std::future::Future;
use std::time::Duration;

use tokio_postgres::Client;

use super::{connect, BenchResult, Context};

/// How often the samplers sample.
pub(super) const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// One kind of sample: what one tick reads (`None`: nothing this time).
pub(super) trait Probe: Send + 'static {
    /// A sample.
    type Sample: Send + 'static;

    /// Takes one sample on `client`.
    fn take(&mut self, client: &Client) -> impl Future<Output = Option<Self::Sample>> + Send;
}

/// A running sampler.
pub(super) struct Sampler<T> {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Vec<T>>,
}

impl<T: Send + 'static> Sampler<T> {
    /// Connects to `conninfo`, runs `setup` there, and takes `probe`'s sample every
    /// [`SAMPLE_EVERY`] until [`Sampler::finish`].
    pub(super) async fn start<P: Probe<Sample = T>>(
        conninfo: &str,
        setup: &str,
        mut probe: P,
    ) -> BenchResult<Sampler<T>> {
        let client = connect(conninfo).await?;
        client
            .batch_execute(setup)
            .await
            .ctx("setting up a sampler")?;
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                if let Some(sample) = probe.take(&client).await {
                    samples.push(sample);
                }
            }
            samples
        });
        Ok(Sampler { stop, task })
    }

    /// Stops sampling and returns every sample taken.
    pub(super) async fn finish(self) -> Vec<T> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}
