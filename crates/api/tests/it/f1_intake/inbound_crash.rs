//! No crash window loses an event: a Redis claim never hides an event Postgres lacks, a
//! restarting Postgres answers 503, and one unstorable row never fails its batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::signing::{self, SLACK_SECRET, TELEGRAM_SECRET};
use switchboard_testing::{TestApp, TestDb, try_eventually_every};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn slack(event_id: &str, ts: &str, text: &str) -> signing::Signed {
    signing::slack(SLACK_SECRET, event_id, "U7", ts, text)
}

/// The pod stops between its dedup claim and its commit (as if killed there); the provider's
/// retry must be stored and processed, not answered "duplicate" with nothing stored.
#[tokio::test]
async fn a_crash_between_the_claim_and_the_commit_loses_nothing() {
    let app = TestApp::builder().fake_agent().build().await;
    let (p, db) = (app.pod(0), &app.db);
    let path = app.org().await.webhook("slack");
    let webhook = slack("EvCrash1", "1700000100.000001", "are you there?");

    p.server.state().flows.faults.crash_intake_after_claim(true);
    let (status, body) = p.send_webhook(&path, &webhook).await;
    assert_ne!(status, 200, "nothing was committed: {body}");
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, 0);

    p.server
        .state()
        .flows
        .faults
        .crash_intake_after_claim(false);
    let (status, body) = p.send_webhook(&path, &webhook).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("accepted"), "the retry is stored: {body}");
    let stored = "SELECT count(*) FROM messages WHERE body = 'are you there?'";
    assert_eq!(db.wait_for_count(stored, 1).await, 1);
    // And now it is a duplicate, answered from the promoted key.
    let (status, body) = p.send_webhook(&path, &webhook).await;
    assert_eq!((status, body.contains("duplicate")), (200, true), "{body}");
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, 1);
}

/// A Postgres wire-protocol proxy that can play "restarting": it cuts every open connection
/// and answers new ones with `57P03 the database system is starting up`, as Postgres does.
struct PgProxy {
    port: u16,
    restarting: Arc<AtomicBool>,
    generation: tokio::sync::watch::Sender<u64>,
}

impl PgProxy {
    async fn start(target: String) -> PgProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let restarting = Arc::new(AtomicBool::new(false));
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let (flag, gen_tx) = (restarting.clone(), generation.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                if flag.load(Ordering::SeqCst) {
                    tokio::spawn(async move { starting_up(&mut client).await });
                    continue;
                }
                let target = target.clone();
                let mut cut = gen_tx.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        PgProxy {
            port,
            restarting,
            generation,
        }
    }

    fn restart(&self, down: bool) {
        self.restarting.store(down, Ordering::SeqCst);
        if down {
            self.generation.send_modify(|g| *g += 1);
        }
    }
}

/// Answers a connection attempt the way a starting Postgres does.
async fn starting_up(client: &mut TcpStream) {
    let mut len = [0u8; 4];
    if client.read_exact(&mut len).await.is_err() {
        return;
    }
    let mut rest = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
    if client.read_exact(&mut rest).await.is_err() {
        return;
    }
    // An SSLRequest (code 80877103) is refused with 'N'; the startup message follows.
    if rest.len() == 4 && u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) == 80_877_103 {
        let _ = client.write_all(b"N").await;
        let _ = client.read(&mut [0u8; 1024]).await;
    }
    let mut fields = Vec::new();
    for (tag, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "57P03"),
        (b'M', "the database system is starting up"),
    ] {
        fields.push(tag);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    message.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    message.extend_from_slice(&fields);
    let _ = client.write_all(&message).await;
}

#[tokio::test]
async fn a_restarting_postgres_answers_503_never_500() {
    let db = TestDb::fresh().await;
    // postgres://user@127.0.0.1:PORT/name → the proxy in between.
    let (head, tail) = db.url.split_once("@").unwrap();
    let (host_port, name) = tail.split_once('/').unwrap();
    let proxy = PgProxy::start(host_port.to_owned()).await;
    let proxied = TestDb {
        url: format!("{head}@127.0.0.1:{}/{name}", proxy.port),
        direct_url: db.direct_url.clone(),
        name: db.name.clone(),
    };
    let app = TestApp::builder().db(proxied).fake_agent().build().await;
    let p = app.pod(0);
    let org = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let slack_path = org.webhook("slack");
    let (status, _) = p
        .send_webhook(&slack_path, &slack("EvPg1", "1700000200.000001", "one"))
        .await;
    assert_eq!(status, 200, "the connection is cached now");

    proxy.restart(true);
    // A cached connection: the commit fails. An uncached one: the lookup fails.
    let telegram_path = org.webhook("telegram");
    let tg = signing::telegram(TELEGRAM_SECRET, 9001, 9001, "two");
    let two = slack("EvPg2", "1700000200.000002", "two");
    let (cached, uncached) = tokio::join!(
        p.send_webhook(&slack_path, &two),
        p.send_webhook(&telegram_path, &tg),
    );
    for (status, body) in [cached, uncached] {
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("dependency_unavailable"), "{body}");
    }
    let (status, body) = p.as_user(&expert.token).get("/expert-queue").await;
    assert_eq!(status, 503, "REST too: {body}");

    proxy.restart(false);
    // Retried as a provider retries, a few times a second.
    let retry = || async { (p.send_webhook(&telegram_path, &tg).await.0 == 200).then_some(()) };
    let every = Duration::from_millis(250);
    assert!(
        try_eventually_every(Duration::from_secs(5), every, retry)
            .await
            .is_some(),
        "the provider's retry is stored once Postgres is back"
    );
}

/// Postgres refuses `\u0000` in jsonb and NUL in text; such an event is stored (stripped)
/// and never takes the other webhooks of its batch down with it.
#[tokio::test]
async fn a_nul_in_one_event_fails_neither_it_nor_its_batch() {
    let app = TestApp::builder().fake_agent().build().await;
    let (p, db) = (app.pod(0), &app.db);
    let path = app.org().await.webhook("slack");
    let mut signed = vec![slack("EvNul", "1700000300.000000", "bad\u{0}byte")];
    assert!(String::from_utf8_lossy(&signed[0].body).contains("\\u0000"));
    for i in 1..=20 {
        signed.push(slack(
            &format!("EvGood{i}"),
            &format!("1700000300.{i:06}"),
            &format!("good {i}"),
        ));
    }
    let answers = futures::future::join_all(signed.iter().map(|s| p.send_webhook(&path, s))).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
    }
    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM messages", 21).await,
        21
    );
    assert_eq!(
        db.count("SELECT count(*) FROM messages WHERE body = 'badbyte'")
            .await,
        1,
        "stored without the NUL"
    );
}
