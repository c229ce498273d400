//! No crash window loses an event: a Redis claim never hides an event Postgres lacks, a
//! restarting Postgres answers 503, and one unstorable row never fails its batch.

use crate::inbound_support::{agent, connections, count, pod, send, wait_for_count};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use switchboard_testing::signing;
use switchboard_testing::{TestDb, random_prefix, redis_url};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn slack(event_id: &str, ts: &str, text: &str) -> signing::Signed {
    signing::slack("slack-signing-secret", event_id, "U7", ts, text)
}

/// The pod stops between its dedup claim and its commit (as if killed there); the provider's
/// retry must be stored and processed, not answered "duplicate" with nothing stored.
#[tokio::test]
async fn a_crash_between_the_claim_and_the_commit_loses_nothing() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let p = pod(&db, &redis_url(), &random_prefix(), &agent.uri()).await;
    let (_, conns) = connections(&db, &p).await;
    let path = format!("/webhooks/slack/{}", conns[0].1);
    let webhook = slack("EvCrash1", "1700000100.000001", "are you there?");

    p.server.state().intake.crash_after_claim(true);
    let (status, body) = send(&p, &path, &webhook).await;
    assert_ne!(status, 200, "nothing was committed: {body}");
    assert_eq!(count(&db, "SELECT count(*) FROM inbound_events").await, 0);

    p.server.state().intake.crash_after_claim(false);
    let (status, body) = send(&p, &path, &webhook).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("accepted"), "the retry is stored: {body}");
    assert_eq!(
        wait_for_count(
            &db,
            "SELECT count(*) FROM messages WHERE body = 'are you there?'",
            1
        )
        .await,
        1
    );
    // And now it is a duplicate, answered from the promoted key.
    let (status, body) = send(&p, &path, &webhook).await;
    assert_eq!((status, body.contains("duplicate")), (200, true), "{body}");
    assert_eq!(count(&db, "SELECT count(*) FROM inbound_events").await, 1);
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
    let agent = agent().await;
    let p = pod(&proxied, &redis_url(), &random_prefix(), &agent.uri()).await;
    let (org, conns) = connections(&db, &p).await;
    let (_, email, password) =
        switchboard_testing::seed_member(&db, Some(org), switchboard_domain::Role::Expert).await;
    let token = p.login(&email, &password).await;
    let slack_path = format!("/webhooks/slack/{}", conns[0].1);
    let (status, _) = send(&p, &slack_path, &slack("EvPg1", "1700000200.000001", "one")).await;
    assert_eq!(status, 200, "the connection is cached now");

    proxy.restart(true);
    // A cached connection: the commit fails. An uncached one: the lookup fails.
    let telegram_path = format!("/webhooks/telegram/{}", conns[2].1);
    let tg = signing::telegram("tg-secret-0123456789", 9001, 9001, "two");
    let two = slack("EvPg2", "1700000200.000002", "two");
    let (cached, uncached) =
        tokio::join!(send(&p, &slack_path, &two), send(&p, &telegram_path, &tg),);
    for (status, body) in [cached, uncached] {
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("dependency_unavailable"), "{body}");
    }
    let rest = p
        .client
        .get(p.url("/expert-queue"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 503, "REST too: {:?}", rest.text().await);

    proxy.restart(false);
    let mut status = 0;
    for _ in 0..20 {
        status = send(&p, &telegram_path, &tg).await.0;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        status, 200,
        "the provider's retry is stored once Postgres is back"
    );
}

/// Postgres refuses `\u0000` in jsonb and NUL in text; such an event is stored (stripped)
/// and never takes the other webhooks of its batch down with it.
#[tokio::test]
async fn a_nul_in_one_event_fails_neither_it_nor_its_batch() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let p = pod(&db, &redis_url(), &random_prefix(), &agent.uri()).await;
    let (_, conns) = connections(&db, &p).await;
    let path = format!("/webhooks/slack/{}", conns[0].1);
    let mut signed = vec![slack("EvNul", "1700000300.000000", "bad\u{0}byte")];
    assert!(String::from_utf8_lossy(&signed[0].body).contains("\\u0000"));
    for i in 1..=20 {
        signed.push(slack(
            &format!("EvGood{i}"),
            &format!("1700000300.{i:06}"),
            &format!("good {i}"),
        ));
    }
    let answers = futures::future::join_all(signed.iter().map(|s| send(&p, &path, s))).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
    }
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM messages", 21).await,
        21
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM messages WHERE body = 'badbyte'").await,
        1,
        "stored without the NUL"
    );
}
