//! Many jobs' statements run as one. Concurrent callers hand in a request and await its
//! answer; one task takes everything waiting (up to a batch size) and runs it as a batch, so
//! one statement and one commit serve many events. While a batch runs, the next one gathers:
//! an idle pod runs each request at once, a busy one in batches as large as its backlog.
//!
//! Two requests with the same key never share a batch: one statement cannot update one row
//! twice (Postgres refuses `ON CONFLICT DO UPDATE` on a row it already touched, and an
//! `UPDATE … FROM` silently applies only one of two source rows). The later one waits for
//! the next batch, so requests of one key also keep their order.

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use switchboard_domain::periodic;
use tokio::sync::{mpsc, oneshot};

/// The batch task has stopped (it panicked, or the runtime is shutting down).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the batching task has stopped")]
pub struct Stopped;

struct Waiting<Req, Resp> {
    request: Req,
    reply: oneshot::Sender<Resp>,
}

/// Handle to one batch task; cheap to clone.
pub struct Coalescer<Req, Resp> {
    tx: mpsc::UnboundedSender<Waiting<Req, Resp>>,
}

impl<Req, Resp> Clone for Coalescer<Req, Resp> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
        }
    }
}

impl<Req, Resp> std::fmt::Debug for Coalescer<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Coalescer")
    }
}

impl<Req, Resp> Coalescer<Req, Resp>
where
    Req: Send + 'static,
    Resp: Send + 'static,
{
    /// Starts the batch task. `run` gets up to `max` requests with distinct `key`s and
    /// returns one answer per request, in order. The task holds no work of its own (every
    /// request it holds has a caller awaiting it) and ends when the last handle is dropped.
    pub fn spawn<K, F, Fut>(max: usize, key: fn(&Req) -> K, run: F) -> Self
    where
        K: Eq + Hash + 'static,
        F: Fn(Vec<Req>) -> Fut + Send + 'static,
        Fut: Future<Output = Vec<Resp>> + Send,
    {
        let (tx, mut rx) = mpsc::unbounded_channel::<Waiting<Req, Resp>>();
        let max = max.max(1);
        periodic::detach(async move {
            let mut waiting: VecDeque<Waiting<Req, Resp>> = VecDeque::new();
            loop {
                if waiting.is_empty() {
                    match rx.recv().await {
                        Some(w) => waiting.push_back(w),
                        None => return,
                    }
                }
                while let Ok(w) = rx.try_recv() {
                    waiting.push_back(w);
                }
                let batch = take_batch(&mut waiting, max, key);
                let (requests, replies): (Vec<Req>, Vec<oneshot::Sender<Resp>>) =
                    batch.into_iter().map(|w| (w.request, w.reply)).unzip();
                metrics::histogram!("coalesced_batch_size").record(requests.len() as f64);
                let answers = run(requests).await;
                debug_assert_eq!(answers.len(), replies.len());
                for (reply, answer) in replies.into_iter().zip(answers) {
                    // A caller that gave up no longer needs its answer.
                    let _ = reply.send(answer);
                }
            }
        });
        Self { tx }
    }

    /// Runs `request` in the next batch that can take it.
    pub async fn call(&self, request: Req) -> Result<Resp, Stopped> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Waiting { request, reply })
            .map_err(|_| Stopped)?;
        answer.await.map_err(|_| Stopped)
    }
}

/// The oldest waiting requests, at most `max` and no two with one key; the rest stay, in
/// their order.
fn take_batch<Req, Resp, K: Eq + Hash>(
    waiting: &mut VecDeque<Waiting<Req, Resp>>,
    max: usize,
    key: fn(&Req) -> K,
) -> Vec<Waiting<Req, Resp>> {
    let mut keys = HashSet::new();
    let mut batch = Vec::new();
    let mut rest = VecDeque::with_capacity(waiting.len());
    for w in waiting.drain(..) {
        if batch.len() < max && keys.insert(key(&w.request)) {
            batch.push(w);
        } else {
            rest.push_back(w);
        }
    }
    *waiting = rest;
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::{Mutex, Notify, Semaphore};

    type Batches = Arc<Mutex<Vec<Vec<(u32, u32)>>>>;

    #[tokio::test]
    async fn waiting_requests_share_a_batch_but_never_with_their_own_key() {
        let batches: Batches = Arc::default();
        let started = Arc::new(Notify::new());
        let gate = Arc::new(Semaphore::new(0));
        let (seen, on_start, open) = (batches.clone(), started.clone(), gate.clone());
        let c = Coalescer::spawn(
            3,
            |r: &(u32, u32)| r.0,
            move |reqs: Vec<(u32, u32)>| {
                let (seen, on_start, open) = (seen.clone(), on_start.clone(), open.clone());
                async move {
                    // The first batch waits until every later request is queued.
                    if seen.lock().await.is_empty() {
                        on_start.notify_one();
                        open.acquire().await.expect("gate open").forget();
                    }
                    seen.lock().await.push(reqs.clone());
                    reqs.iter().map(|r| r.1 * 10).collect::<Vec<_>>()
                }
            },
        );
        let first = tokio::spawn({
            let c = c.clone();
            async move { c.call((0, 0)).await }
        });
        started.notified().await;
        let rest: Vec<_> = [(1, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
            .into_iter()
            .map(|r| {
                let c = c.clone();
                tokio::spawn(async move { c.call(r).await })
            })
            .collect();
        // Each spawned caller queues its request when first polled.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(1);
        assert_eq!(first.await.expect("joins").expect("answered"), 0);
        let mut answers = Vec::new();
        for r in futures::future::join_all(rest).await {
            answers.push(r.expect("joins").expect("answered"));
        }
        assert_eq!(
            answers,
            [10, 20, 30, 40, 50],
            "each caller gets its own answer"
        );
        assert_eq!(
            *batches.lock().await,
            [
                vec![(0, 0)],
                vec![(1, 1), (2, 3), (3, 4)],
                vec![(1, 2), (4, 5)],
            ],
            "at most 3 a batch, key 1 twice never in one, order kept"
        );
    }
}
