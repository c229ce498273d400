//! Webhook load as providers send it while a test breaks something underneath: about 100
//! events a second, spread over the pods the way a load balancer without stickiness does,
//! each sent again (to the next pod) until one answers 200, as a provider retries.

use crate::signing::Signed;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::{JoinHandle, JoinSet};

/// How long one event is retried before the test fails: longer than any outage a test
/// makes.
const GIVE_UP: Duration = Duration::from_secs(120);

/// Load running in the background; [`Load::stop`] ends it.
pub struct Load {
    stop: Arc<AtomicBool>,
    task: JoinHandle<u64>,
}

impl Load {
    /// Starts sending event `n` of `event` (its path and signed request) every 10 ms to the
    /// pods at `bases`, from pod `n % bases.len()` on.
    pub fn start(
        bases: Vec<String>,
        event: impl Fn(u64) -> (String, Signed) + Send + 'static,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let http = crate::http();
            let bases = Arc::new(bases);
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let mut deliveries = JoinSet::new();
            let mut n = 0_u64;
            while !stopping.load(Ordering::SeqCst) {
                tick.tick().await;
                let (path, signed) = event(n);
                let (http, bases) = (http.clone(), bases.clone());
                deliveries.spawn(async move { deliver(&http, &bases, &path, &signed, n).await });
                n += 1;
            }
            while let Some(done) = deliveries.join_next().await {
                done.expect("delivery");
            }
            n
        });
        Load { stop, task }
    }

    /// Stops sending, awaits every event's acceptance, and returns how many were sent.
    pub async fn stop(self) -> i64 {
        self.stop.store(true, Ordering::SeqCst);
        let sent = self
            .task
            .await
            .expect("load finished: every event accepted");
        i64::try_from(sent).expect("count")
    }
}

/// Sends `signed` until a pod answers 200, the next pod each time.
async fn deliver(http: &reqwest::Client, bases: &[String], path: &str, signed: &Signed, n: u64) {
    let deadline = Instant::now() + GIVE_UP;
    let mut attempt = n as usize;
    loop {
        let base = &bases[attempt % bases.len()];
        let mut request = http
            .post(format!("{base}{path}"))
            .timeout(Duration::from_secs(10))
            .body(signed.body.clone());
        for (name, value) in &signed.headers {
            request = request.header(*name, value);
        }
        if let Ok(response) = request.send().await {
            if response.status() == 200 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "event {n} was never accepted");
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
