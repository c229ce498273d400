//! Hostile input is bounded: CPU-heavy parsing stays off the async threads, slow clients
//! are cut off without holding the drain, and unauthenticated requests cost nothing shared.

use std::time::{Duration, Instant};
use switchboard_testing::signing::{self, SLACK_SECRET, WHSEC};
use switchboard_testing::{TestApp, TestDb, TestPod, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An email whose HTML body is 1 MiB of `<style></style>` (minutes of work for a quadratic
/// converter) is accepted, and `/health` keeps answering while it is parsed.
#[tokio::test]
async fn a_megabyte_of_style_tags_never_stalls_the_pod() {
    let app = TestApp::builder()
        .fake_agent()
        .env("BODY_LIMIT_BYTES", "4194304")
        .no_workers()
        .build()
        .await;
    let p = app.pod(0);
    let path = app.org().await.webhook("email");
    let body = serde_json::to_vec(&serde_json::json!({
        "type": "email.received", "created_at": "2026-11-29T10:00:00Z",
        "data": {"email_id": "em_style", "from": "Eve <eve@example.test>", "to": ["support@example.test"],
                 "subject": "styles", "message_id": "<style@mail.test>",
                 "html": "<style></style>".repeat((1 << 20) / 15)}
    }))
    .unwrap();
    let signed =
        signing::standard_webhook(WHSEC, "msg_style", chrono::Utc::now().timestamp(), body);
    let webhook = p.send_webhook(&path, &signed);
    let health = async {
        let mut slowest = Duration::ZERO;
        for _ in 0..10 {
            let started = Instant::now();
            let r = tokio::time::timeout(
                Duration::from_secs(2),
                p.client.get(p.url("/health")).send(),
            )
            .await;
            assert!(
                matches!(r, Ok(Ok(ref r)) if r.status() == 200),
                "/health did not answer"
            );
            slowest = slowest.max(started.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest
    };
    let ((status, answer), slowest) = tokio::join!(webhook, health);
    assert_eq!(status, 200, "{answer}");
    assert!(
        slowest < Duration::from_millis(500),
        "/health took {slowest:?}"
    );
}

/// A pod that cuts slow clients off within seconds, and the path of its Slack webhook.
async fn timeouts_pod() -> (TestApp, String) {
    let app = TestApp::builder()
        .fake_agent()
        .env("HTTP_HEADER_TIMEOUT_MS", "1000")
        .env("HTTP_BODY_TIMEOUT_MS", "1000")
        .env("HTTP_REQUEST_TIMEOUT_MS", "3000")
        .build()
        .await;
    let path = app.org().await.webhook("slack");
    (app, path)
}

/// Sends `head` one byte every 200 ms until the server closes the connection (or 8 s pass);
/// returns how long the server kept it open.
async fn trickle_headers(addr: std::net::SocketAddr, head: &[u8]) -> Duration {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    for byte in head.iter().cycle() {
        if started.elapsed() > Duration::from_secs(8) || stream.write_all(&[*byte]).await.is_err() {
            break;
        }
        let mut buf = [0u8; 256];
        // An answer (hyper's 408) or the connection closed: cut off either way.
        let read = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await;
        if read.is_ok() {
            break;
        }
    }
    started.elapsed()
}

/// Sends a chunked body, a chunk every 200 ms, until the server answers or closes (or 8 s
/// pass); returns the answer's status line and how long it took.
async fn endless_body(addr: std::net::SocketAddr, path: &str) -> (String, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    while started.elapsed() < Duration::from_secs(8) {
        if stream.write_all(b"1\r\n \r\n").await.is_err() {
            break;
        }
        let mut buf = [0u8; 1024];
        match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                break;
            }
            Err(_) => {}
        }
    }
    let line = String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    (line, started.elapsed())
}

#[tokio::test]
async fn a_client_sending_headers_one_byte_at_a_time_is_cut_off() {
    let (app, _) = timeouts_pod().await;
    let kept = trickle_headers(
        app.pod(0).server.local_addr(),
        b"GET /health HTTP/1.1\r\nx-slow: ",
    )
    .await;
    assert!(
        kept < Duration::from_secs(3),
        "the connection stayed open {kept:?}"
    );
}

#[tokio::test]
async fn a_chunked_body_that_never_ends_is_cut_off() {
    let (app, path) = timeouts_pod().await;
    let (line, took) = endless_body(app.pod(0).server.local_addr(), &path).await;
    assert!(line.contains("408"), "answered {line:?} after {took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// Neither kind of slow client holds a pod that is shutting down.
#[tokio::test]
async fn slow_clients_do_not_hold_the_drain() {
    let (mut app, path) = timeouts_pod().await;
    let p = app.pods.remove(0);
    let addr = p.server.local_addr();
    let slow_head =
        tokio::spawn(
            async move { trickle_headers(addr, b"GET /health HTTP/1.1\r\nx-slow: ").await },
        );
    let slow_body = tokio::spawn(async move { endless_body(addr, &path).await });
    // The slow clients get going (the server shows no sign of having accepted them).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    p.server.begin_shutdown();
    tokio::time::timeout(Duration::from_secs(8), p.server.wait())
        .await
        .expect("the drain finished")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "drain took {:?}",
        started.elapsed()
    );
    let _ = (slow_head.await, slow_body.await);
}

/// Forged webhooks never make the pod's workers give way (only genuine ones count as in
/// flight), and an unknown connection id is looked up in Postgres once, not per request.
#[tokio::test]
async fn unauthenticated_webhooks_cost_nothing_shared() {
    let app = TestApp::builder()
        .fake_agent()
        .env("ACCEPT_PRIORITY_IN_FLIGHT", "1")
        .build()
        .await;
    let (p, db) = (app.pod(0), &app.db);
    let org = app.org().await;
    let (path, org) = (org.webhook("slack"), org.id);
    let load = &p.server.state().flows.load;
    let calm = || async { (!load.busy()).then_some(()) };
    eventually("the pod is calm", Duration::from_secs(5), calm).await;
    let forged = signing::slack("wrong-secret", "EvForged", "U1", "1700000000.000001", "hi");
    for _ in 0..10 {
        assert_eq!(p.send_webhook(&path, &forged).await.0, 401);
    }
    assert!(!load.busy(), "forged webhooks made the workers give way");

    // The cache must be live (subscribed) to remember anything; a known id proves it.
    let good = signing::slack(SLACK_SECRET, "EvOk", "U1", "1700000000.000002", "hi");
    assert_eq!(p.send_webhook(&path, &good).await.0, 200);
    let cache = &p.server.state().connections;
    let unknown = uuid::Uuid::new_v4();
    let before = cache.queries();
    for _ in 0..20 {
        let unknown_path = format!("/webhooks/slack/{unknown}");
        assert_eq!(p.send_webhook(&unknown_path, &forged).await.0, 404);
    }
    assert_eq!(
        cache.queries() - before,
        1,
        "one lookup for 20 requests to one unknown id"
    );

    // The id comes to exist (a create publishes its id): the remembered miss is dropped.
    let pool = db.pool().await;
    let cipher = switchboard_store::crypto::SecretCipher::new(
        &base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            switchboard_testing::MASTER_KEY,
        )
        .unwrap()
        .try_into()
        .unwrap(),
    );
    let sealed = cipher
        .seal(
            unknown,
            &serde_json::to_vec(&signing::secrets("slack")).unwrap(),
        )
        .unwrap();
    sqlx::query(
        "INSERT INTO channel_connections (id, org_id, channel, name, secrets_ciphertext, settings)
         VALUES ($1, $2, 'slack', 'late', $3, '{}')",
    )
    .bind(unknown)
    .bind(org)
    .bind(sealed)
    .execute(&pool)
    .await
    .unwrap();
    cache.invalidate(unknown).await;
    let late = signing::slack(SLACK_SECRET, "EvLate", "U1", "1700000000.000003", "hi");
    let unknown_path = format!("/webhooks/slack/{unknown}");
    assert_eq!(p.send_webhook(&unknown_path, &late).await.0, 200);
}

/// A client's `X-Request-Id` is kept only when short and plain: a long or odd one is replaced
/// by a generated id in the response, the logs and the audit row.
#[tokio::test]
async fn request_ids_are_kept_only_when_short_and_plain() {
    let (p, db) = TestPod::single().await;
    let login = |id: String| {
        p.client
            .post(p.url("/auth/login"))
            .header("x-request-id", id)
            .json(
                &serde_json::json!({"email": "nobody@example.test", "password": "wrong password"}),
            )
            .send()
    };
    let echoed = |r: &reqwest::Response| {
        r.headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let plain = "req-1.A_b";
    let r = login(plain.to_owned()).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(echoed(&r), plain);
    let long = "a".repeat(10_000);
    for hostile in [
        long.clone(),
        "a".repeat(65),
        "two words".into(),
        "a/b".into(),
        "é".into(),
    ] {
        let r = login(hostile.clone()).await.unwrap();
        assert_eq!(r.status(), 401);
        let id = echoed(&r);
        assert_ne!(id, hostile);
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "a generated id: {id}");
    }
    // Two values are not one id either.
    let r = p
        .client
        .post(p.url("/auth/login"))
        .header("x-request-id", "one")
        .header("x-request-id", "two")
        .json(&serde_json::json!({"email": "nobody@example.test", "password": "wrong password"}))
        .send()
        .await
        .unwrap();
    assert!(uuid::Uuid::parse_str(&echoed(&r)).is_ok());
    assert_eq!(
        db.count("SELECT count(*) FROM audit_log WHERE length(request_id) > 64")
            .await,
        0
    );
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM audit_log WHERE request_id = '{plain}'"
        ))
        .await,
        1,
        "the plain id is what the audit row names"
    );
}

/// The schema refuses client text over its documented limit even from a path that forgot
/// to check it.
#[tokio::test]
async fn the_schema_refuses_text_over_its_limits() {
    let db = TestDb::fresh().await;
    let pool = db.pool().await;
    let refused = |sql: String| {
        let pool = pool.clone();
        async move {
            let err = sqlx::query(&sql).execute(&pool).await.expect_err(&sql);
            assert!(
                err.to_string().contains("violates check constraint"),
                "{sql}: {err}"
            );
        }
    };
    refused(format!(
        "INSERT INTO audit_log (action, request_id, details) VALUES ('t', '{}', '{{}}')",
        "a".repeat(65)
    ))
    .await;
    refused(format!(
        "INSERT INTO orgs (name) VALUES ('{}')",
        "o".repeat(201)
    ))
    .await;
    refused(format!(
        "INSERT INTO users (email, password_hash) VALUES ('{}@x.test', 'h')",
        "u".repeat(250)
    ))
    .await;
    sqlx::query(&format!(
        "INSERT INTO audit_log (action, request_id, details) VALUES ('t', '{}', '{{}}')",
        "a".repeat(64)
    ))
    .execute(&pool)
    .await
    .expect("64 characters are within the limit");
}

/// Cleartext HTTP/2 is off unless asked for: the HTTP/2 preface gets no HTTP/2 answer.
#[tokio::test]
async fn cleartext_http2_is_off_unless_asked_for() {
    async fn first_bytes(base: &str) -> Vec<u8> {
        let addr = base.trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).await.unwrap();
        // The client preface, then an empty SETTINGS frame.
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            .await
            .unwrap();
        let mut buf = vec![0_u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .unwrap_or(Ok(0))
            .unwrap_or(0);
        buf.truncate(n);
        buf
    }
    let (off, _db) = TestPod::single().await;
    let answer = first_bytes(&off.base).await;
    assert!(
        !(answer.len() >= 4 && answer[3] == 0x04),
        "no HTTP/2 SETTINGS frame: {answer:?}"
    );
    let (on, _db2) = TestPod::single_with(|v| {
        v.insert("HTTP2_CLEARTEXT".into(), "true".into());
    })
    .await;
    let answer = first_bytes(&on.base).await;
    assert!(
        answer.len() >= 4 && answer[3] == 0x04,
        "a SETTINGS frame: {answer:?}"
    );
}
