//! One client's abuse does not reach another: each scenario runs from an attacking address
//! and an honest one (told apart by `X-Forwarded-For` from a trusted proxy, as behind the
//! load balancer), and checks what each got.

use serde_json::json;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::signing::{self, SLACK_SECRET};
use switchboard_testing::socket::connect;
use switchboard_testing::{TestApp, seed_member, try_eventually};

const ATTACKER: &str = "203.0.113.66";
const HONEST: &str = "198.51.100.7";

/// A pod behind a trusted proxy (the tests' own address), so `X-Forwarded-For` names the
/// client.
fn behind_proxy() -> switchboard_testing::TestAppBuilder {
    TestApp::builder().env("TRUSTED_PROXIES", "127.0.0.1")
}

#[tokio::test]
async fn wrong_passwords_from_one_address_never_lock_the_owner_out_elsewhere() {
    let app = behind_proxy().build().await;
    let pod = app.pod(0);
    let (_, email, password) = seed_member(&app.db, None, Role::Expert).await;
    let mut attacker = Vec::new();
    for _ in 0..14 {
        attacker.push(
            pod.forwarded_for(ATTACKER)
                .try_login(&email, "not the password")
                .await
                .0,
        );
    }
    // 10 failures per email and address, then refused early.
    assert_eq!(
        attacker.iter().filter(|s| **s == 401).count(),
        10,
        "{attacker:?}"
    );
    assert_eq!(
        attacker.iter().filter(|s| **s == 429).count(),
        4,
        "{attacker:?}"
    );
    // The owner, from another address, logs in at once.
    assert_eq!(
        pod.forwarded_for(HONEST)
            .try_login(&email, &password)
            .await
            .0,
        200
    );
    // The attacker's address is refused even with the right password, until its window
    // passes (the honest address's success does not reset another address's failures).
    assert_eq!(
        pod.forwarded_for(ATTACKER)
            .try_login(&email, &password)
            .await
            .0,
        429
    );
}

#[tokio::test]
async fn login_bodies_that_do_not_parse_count_against_the_address() {
    let app = behind_proxy()
        .env("RATE_LIMIT_LOGIN_IP", "5/min")
        .build()
        .await;
    let pod = app.pod(0);
    let (_, email, password) = seed_member(&app.db, None, Role::Expert).await;
    for _ in 0..5 {
        let status = pod
            .client
            .post(pod.url("/auth/login"))
            .header("x-forwarded-for", ATTACKER)
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 400);
    }
    assert_eq!(
        pod.forwarded_for(ATTACKER)
            .try_login(&email, &password)
            .await
            .0,
        429
    );
    assert_eq!(
        pod.forwarded_for(HONEST)
            .try_login(&email, &password)
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn forged_webhooks_cost_the_forger_not_the_channel() {
    let app = behind_proxy()
        .fake_agent()
        // A small allowance, so forged requests would use it up if they counted.
        .env("RATE_LIMIT_WEBHOOK_SLACK", "30/min")
        .no_workers()
        .build()
        .await;
    let pod = app.pod(0);
    let path = app.org().await.webhook("slack");
    let genuine = |n: usize| {
        signing::slack(
            SLACK_SECRET,
            &format!("EvGenuine{n}"),
            "U1",
            &format!("1700000400.{n:06}"),
            "hello",
        )
    };
    let mut forged = genuine(0);
    forged
        .headers
        .retain(|(name, _)| !name.eq_ignore_ascii_case("x-slack-signature"));
    forged
        .headers
        .push(("x-slack-signature", format!("v0={}", "0".repeat(64))));

    let mut attacker = Vec::new();
    for _ in 0..80 {
        attacker.push(
            pod.forwarded_for(ATTACKER)
                .send_webhook(&path, &forged)
                .await
                .0,
        );
    }
    // 60 a minute: the burst, then refused early, one more a second as the limit refills.
    assert!(attacker[..60].iter().all(|s| *s == 401), "{attacker:?}");
    let answered = attacker.iter().filter(|s| **s == 401).count();
    assert!(answered <= 66, "{attacker:?}");
    assert_eq!(
        answered + attacker.iter().filter(|s| **s == 429).count(),
        80,
        "{attacker:?}"
    );
    // The provider's genuine deliveries still fit the connection's whole allowance.
    for n in 1..=25 {
        assert_eq!(
            pod.forwarded_for(HONEST)
                .send_webhook(&path, &genuine(n))
                .await
                .0,
            200,
            "genuine {n}"
        );
    }
}

#[tokio::test]
async fn invented_connection_ids_are_cut_off_per_address() {
    let app = behind_proxy().build().await;
    let pod = app.pod(0);
    let body = signing::Signed {
        body: b"{}".to_vec(),
        headers: vec![("content-type", "application/json".into())],
    };
    let mut attacker = Vec::new();
    for _ in 0..70 {
        let path = format!("/webhooks/telegram/{}", uuid::Uuid::new_v4());
        attacker.push(
            pod.forwarded_for(ATTACKER)
                .send_webhook(&path, &body)
                .await
                .0,
        );
    }
    assert!(attacker[..60].iter().all(|s| *s == 404), "{attacker:?}");
    let answered = attacker.iter().filter(|s| **s == 404).count();
    assert!(answered <= 66, "{attacker:?}");
    assert_eq!(
        answered + attacker.iter().filter(|s| **s == 429).count(),
        70,
        "{attacker:?}"
    );
    // Another address is not affected.
    let path = format!("/webhooks/telegram/{}", uuid::Uuid::new_v4());
    assert_eq!(
        pod.forwarded_for(HONEST).send_webhook(&path, &body).await.0,
        404
    );
}

#[tokio::test]
async fn ipv6_clients_share_their_slash_64() {
    let app = behind_proxy()
        .env("RATE_LIMIT_DEFAULT", "10/min")
        .build()
        .await;
    let pod = app.pod(0);
    let get = |from: String| async move {
        pod.client
            .get(pod.url("/auth/me"))
            .header("x-forwarded-for", from)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    // Ten addresses of one /64 use up one bucket; the eleventh is refused.
    for i in 1..=10 {
        assert_eq!(get(format!("2001:db8:1:2::{i:x}")).await, 401);
    }
    assert_eq!(get("2001:db8:1:2:ffff::1".into()).await, 429);
    // The next /64 is another client.
    assert_eq!(get("2001:db8:1:3::1".into()).await, 401);
}

#[tokio::test]
async fn sockets_are_capped_per_user_and_a_closed_one_gives_its_place_back() {
    let app = TestApp::builder()
        .env("SOCKETS_PER_USER", "2")
        .build()
        .await;
    let pod = app.pod(0);
    let token = app.member(None, Role::Expert).await.token;
    let auth = || Some(json!({ "token": token }));
    let first = connect(pod, auth()).await.expect("first");
    let _second = connect(pod, auth()).await.expect("second");
    let refused = connect(pod, auth()).await;
    let Err(refusal) = refused else {
        panic!("a third socket of one user is refused");
    };
    let message = refusal.to_string();
    assert!(
        message.contains("too many open connections for this user"),
        "{message}"
    );
    first.close().await;
    // The closed socket's place comes back once the server has seen it go.
    let again = try_eventually(Duration::from_secs(5), || async {
        connect(pod, auth()).await.ok()
    })
    .await;
    assert!(again.is_some(), "the closed socket's place never came back");
}
