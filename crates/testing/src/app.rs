//! [`TestApp`]: one or more pods on a fresh database and a Redis prefix of their own, with
//! the fakes they talk to, built the way a test asks:
//!
//! ```ignore
//! let app = TestApp::builder().pods(2).fake_agent().build().await;
//! let org = app.org().await;
//! app.pod(1).send_webhook(&org.webhook("slack"), &signed).await;
//! ```

use crate::fakes::{self, Provider};
use crate::user::{Member, Org};
use crate::{TestDb, TestPod, random_prefix, redis_url, seed_member, user_id};
use switchboard_domain::Role;
use uuid::Uuid;
use wiremock::MockServer;

/// Where no agent listens: drafts fail fast (tests of delivery seed their drafts).
const NO_AGENT: &str = "http://127.0.0.1:9";

/// Sweeps that recover a lost inbound job within about a second, and a lease longer than
/// any job of these tests, short enough that a job dropped with its worker (restarted after
/// a Redis error) is retried within the test.
const FAST_INBOX: [(&str, &str); 3] = [
    ("INBOX_GRACE_SECS", "1"),
    ("INBOX_SWEEP_INTERVAL_MS", "300"),
    ("INBOX_LEASE_SECS", "5"),
];

/// Delivery that retries at once and sweeps often; dead letters left alone unless a test
/// asks for them.
const FAST_OUTBOX: [(&str, &str); 6] = [
    ("OUTBOX_GRACE_SECS", "1"),
    ("OUTBOX_SWEEP_INTERVAL_MS", "300"),
    ("OUTBOUND_RETRY_BASE_MS", "20"),
    ("OUTBOUND_TIMEOUT_MS", "2000"),
    ("OUTBOUND_BREAKER_THRESHOLD", "1000"),
    ("DEAD_LETTER_INTERVAL_MS", "3600000"),
];

enum Agent {
    None,
    Fake,
    Given(MockServer),
}

/// Pods, their database and prefix, and the fakes they use.
pub struct TestApp {
    /// The database every pod uses.
    pub db: TestDb,
    /// The pods' Redis key prefix.
    pub prefix: String,
    /// The pods' Redis.
    pub redis_url: String,
    /// The running pods, in the order they started.
    pub pods: Vec<TestPod>,
    agent: Option<MockServer>,
    provider: Option<Provider>,
    env: Vec<(String, String)>,
}

/// How to build a [`TestApp`]; see [`TestApp::builder`].
pub struct TestAppBuilder {
    pods: usize,
    env: Vec<(String, String)>,
    pod_env: Vec<(usize, String, String)>,
    db: Option<TestDb>,
    prefix: Option<String>,
    redis_url: Option<String>,
    agent: Agent,
    provider: bool,
}

impl TestApp {
    /// One pod on a fresh database, no fakes, unless told otherwise.
    pub fn builder() -> TestAppBuilder {
        TestAppBuilder {
            pods: 1,
            env: Vec::new(),
            pod_env: Vec::new(),
            db: None,
            prefix: None,
            redis_url: None,
            agent: Agent::None,
            provider: false,
        }
    }

    /// Pod `i`.
    pub fn pod(&self, i: usize) -> &TestPod {
        &self.pods[i]
    }

    /// Starts one more pod on the same database, Redis and prefix, with the settings the
    /// others got and `extra`.
    pub async fn start_pod(&mut self, extra: &[(&str, &str)]) -> &TestPod {
        let mut vars = self.env.clone();
        vars.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let pod =
            TestPod::start_with(&self.db, &self.redis_url, &self.prefix, |v| v.extend(vars)).await;
        self.pods.push(pod);
        self.pods.last().expect("just pushed")
    }

    /// Drains every pod (SIGTERM's path) and awaits their ends; the database stays, for a
    /// next app on it.
    pub async fn stop(self) -> TestDb {
        for pod in &self.pods {
            pod.server.begin_shutdown();
        }
        for pod in self.pods {
            let _ = pod.server.wait().await;
        }
        self.db
    }

    /// The fake agent ([`TestAppBuilder::fake_agent`] or [`TestAppBuilder::agent`]).
    pub fn agent(&self) -> &MockServer {
        self.agent.as_ref().expect("built with an agent")
    }

    /// The fake providers ([`TestAppBuilder::fake_provider`]).
    pub fn provider(&self) -> &Provider {
        self.provider.as_ref().expect("built with fake_provider()")
    }

    /// A new member of `org` (of a new org when `None`) with `role`, logged in on pod 0.
    pub async fn member(&self, org: Option<Uuid>, role: Role) -> Member {
        let (org, email, password) = seed_member(&self.db, org, role).await;
        let token = self.pod(0).login(&email, &password).await;
        let id = user_id(&self.db, &email).await;
        Member {
            org,
            id,
            email,
            password,
            token,
        }
    }

    /// A new org with an admin and one connection per channel, made through pod 0.
    pub async fn org(&self) -> Org {
        self.org_via(0).await
    }

    /// [`TestApp::org`] made through pod `i`.
    pub async fn org_via(&self, i: usize) -> Org {
        Org::create(&self.db, self.pod(i)).await
    }
}

impl TestAppBuilder {
    /// How many pods to start (1 unless told; 0 for a test that starts its own later).
    pub fn pods(mut self, n: usize) -> Self {
        self.pods = n;
        self
    }

    /// A setting for every pod; later settings win over earlier ones and over the fakes'.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Settings for every pod, as [`TestAppBuilder::env`].
    pub fn envs(mut self, pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env.extend(pairs);
        self
    }

    /// A setting for pod `i` only, over every other.
    pub fn pod_env(mut self, i: usize, key: &str, value: &str) -> Self {
        self.pod_env.push((i, key.to_owned(), value.to_owned()));
        self
    }

    /// Pods that run no jobs: what is queued stays there for the test to count or run.
    pub fn no_workers(self) -> Self {
        self.env("WORKER_CONCURRENCY", "0")
    }

    /// Uses `db` (seeded, or reached through a proxy) instead of a fresh database.
    pub fn db(mut self, db: TestDb) -> Self {
        self.db = Some(db);
        self
    }

    /// Uses `prefix` (shared with something the test made first) instead of a fresh one.
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = Some(prefix.to_owned());
        self
    }

    /// Uses the Redis at `url` (a test's own, which it stops) instead of the shared one.
    pub fn redis(mut self, url: &str) -> Self {
        self.redis_url = Some(url.to_owned());
        self
    }

    /// A fake agent that drafts "Happy to help!" at once, and inbound sweeps fast enough to
    /// recover a lost job within the test.
    pub fn fake_agent(mut self) -> Self {
        self.agent = Agent::Fake;
        self
    }

    /// `agent` as the agent (one that fails, stalls or drafts by the message), with the
    /// sweeps of [`TestAppBuilder::fake_agent`].
    pub fn agent(mut self, agent: MockServer) -> Self {
        self.agent = Agent::Given(agent);
        self
    }

    /// Every channel's replies go to one fake [`Provider`], with fast retries and sweeps.
    pub fn fake_provider(mut self) -> Self {
        self.provider = true;
        self
    }

    /// [`TestAppBuilder::fake_agent`] and [`TestAppBuilder::fake_provider`]: the whole F1-F3
    /// path with nothing real outside the app.
    pub fn fakes(self) -> Self {
        self.fake_agent().fake_provider()
    }

    /// Starts the pods (at once, as a deployment does).
    pub async fn build(self) -> TestApp {
        let db = match self.db {
            Some(db) => db,
            None => TestDb::fresh().await,
        };
        let prefix = self.prefix.unwrap_or_else(random_prefix);
        let redis_url = self.redis_url.unwrap_or_else(redis_url);
        let agent = match self.agent {
            Agent::None => None,
            Agent::Fake => Some(fakes::agent().await),
            Agent::Given(server) => Some(server),
        };
        let provider = if self.provider {
            Some(Provider::start().await)
        } else {
            None
        };
        let mut env: Vec<(String, String)> = Vec::new();
        let mut set = |pairs: &[(&str, &str)]| {
            env.extend(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
            );
        };
        if let Some(agent) = &agent {
            set(&[("AGENT_URL", &agent.uri())]);
            set(&FAST_INBOX);
            // Finished jobs are vacuumed from Redis by the queue-upkeep job.
            set(&[("SCHEDULE_QUEUE_UPKEEP", "@every 300ms")]);
        }
        if let Some(provider) = &provider {
            if agent.is_none() {
                set(&[("AGENT_URL", NO_AGENT)]);
            }
            set(&FAST_INBOX);
            set(&FAST_OUTBOX);
            env.extend(provider.env());
        }
        env.extend(self.env);
        let starts = (0..self.pods).map(|i| {
            let mut vars = env.clone();
            vars.extend(
                self.pod_env
                    .iter()
                    .filter(|(pod, _, _)| *pod == i)
                    .map(|(_, k, v)| (k.clone(), v.clone())),
            );
            TestPod::start_with(&db, &redis_url, &prefix, move |v| v.extend(vars))
        });
        let pods = futures::future::join_all(starts).await;
        TestApp {
            db,
            prefix,
            redis_url,
            pods,
            agent,
            provider,
            env,
        }
    }
}
