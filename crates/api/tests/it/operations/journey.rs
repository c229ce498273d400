//! A message's journey (`GET /conversations/{id}/messages/{message_id}/journey`): a webhook
//! on one pod, a claim and release from the other and a reply the provider refuses twice
//! before taking it read as one story, in order, with each step's pod, from either message of
//! the exchange; no step carries the customer's words; another org, another conversation and
//! a missing message all get the same 404.

use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::signing::slack_message;
use switchboard_testing::{TestApp, wait_outbox};
use uuid::Uuid;
use wiremock::ResponseTemplate;

/// The customer's words and id, which no step may carry.
const TEXT: &str = "JOURNEYMARK my parcel 4471 never came";
const CUSTOMER: &str = "UJOURNEY77";

/// The step names of a journey answer, in order.
fn steps(journey: &Value) -> Vec<&str> {
    journey["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["step"].as_str().expect("step"))
        .collect()
}

/// The pods that wrote the steps named `step`.
fn pods<'a>(journey: &'a Value, step: &str) -> Vec<&'a str> {
    journey["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["step"] == step)
        .map(|s| s["pod"].as_str().expect("pod"))
        .collect()
}

#[tokio::test]
async fn the_journey_of_a_reply_retried_twice_tells_the_whole_exchange_across_two_pods() {
    let app = TestApp::builder()
        .pods(2)
        .fakes()
        .pod_env(0, "POD_ID", "pod-a")
        .pod_env(1, "POD_ID", "pod-b")
        .build()
        .await;
    let (db, provider) = (&app.db, app.provider());
    let org = app.org().await;
    let ada = app.member(Some(org.id), Role::Expert).await;
    let pool = db.pool().await;
    sqlx::query("UPDATE users SET display_name = 'Ada' WHERE id = $1")
        .bind(ada.id)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    provider.script(vec![ResponseTemplate::new(500), ResponseTemplate::new(500)]);

    // The customer writes to pod A; Ada claims and releases the draft on pod B.
    let signed = slack_message(CUSTOMER, "1700000000.000100", TEXT);
    let (status, body) = app
        .pod(0)
        .send_webhook(&org.webhook("slack"), &signed)
        .await;
    assert_eq!(status, 200, "{body}");
    db.wait_for_count("SELECT count(*) FROM drafts", 1).await;
    let item: Uuid = db.scalar("SELECT id FROM expert_queue").await;
    let expert = app.pod(1).as_user(&ada.token);
    let (status, body) = expert.act(item, "claim", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let outbox = expert.release_ok(item, None).await;
    wait_outbox(db, outbox, "sent").await;
    assert_eq!(provider.calls("slack").len(), 3, "500, 500, 200");

    let conversation: Uuid = db.scalar("SELECT conversation_id FROM expert_queue").await;
    let inbound: Uuid = db
        .scalar("SELECT id FROM messages WHERE direction = 'inbound'")
        .await;
    let reply: Uuid = db
        .scalar("SELECT id FROM messages WHERE direction = 'outbound'")
        .await;
    let path = |message: Uuid| format!("/conversations/{conversation}/messages/{message}/journey");
    let (status, journey) = app.pod(0).as_user(&org.token).get(&path(inbound)).await;
    assert_eq!(status, 200, "{journey}");
    assert_eq!(
        steps(&journey),
        [
            "received",
            "committed",
            "queued",
            "drafted",
            "shown",
            "claimed",
            "released",
            "attempt",
            "attempt",
            "attempt",
            "delivered"
        ],
        "{journey:#}"
    );
    let all = journey["steps"].as_array().unwrap();
    let times: Vec<&str> = all.iter().map(|s| s["at"].as_str().unwrap()).collect();
    let parsed: Vec<chrono::DateTime<chrono::Utc>> =
        times.iter().map(|t| t.parse().unwrap()).collect();
    assert!(parsed.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    // Which pod did what: the webhook's, the expert's, and some pod for the jobs.
    assert_eq!(pods(&journey, "received"), ["pod-a"]);
    assert_eq!(pods(&journey, "committed"), ["pod-a"]);
    assert_eq!(pods(&journey, "claimed"), ["pod-b"]);
    assert_eq!(pods(&journey, "released"), ["pod-b"]);
    for step in ["queued", "drafted", "shown", "attempt", "delivered"] {
        for pod in pods(&journey, step) {
            assert!(pod == "pod-a" || pod == "pod-b", "{step} by {pod}");
        }
    }
    // Each step's message: the customer's up to the claim, the reply's from the release.
    let owners: Vec<Uuid> = all
        .iter()
        .map(|s| s["message_id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(owners[..6], [inbound; 6]);
    assert_eq!(owners[6..], [reply; 5]);
    let detail = |i: usize| &all[i]["detail"];
    assert_eq!(detail(3)["fallback"], false);
    assert!(detail(3)["agent_ms"].as_i64().is_some(), "{}", detail(3));
    assert_eq!(detail(5)["name"], "Ada");
    assert_eq!(detail(6)["name"], "Ada");
    assert_eq!(detail(6)["reply"], "draft");
    assert_eq!(detail(6)["unchanged"], true);
    let attempts: Vec<(i64, &str, Option<i64>)> = (7..10)
        .map(|i| {
            (
                detail(i)["attempt"].as_i64().unwrap(),
                detail(i)["outcome"].as_str().unwrap(),
                detail(i)["status"].as_i64(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [
            (1, "retry", Some(500)),
            (2, "retry", Some(500)),
            (3, "accepted", None)
        ]
    );
    assert_eq!(detail(10)["parts"], 1);

    // The reply tells the same story.
    let (status, from_reply) = expert.get(&path(reply)).await;
    assert_eq!(status, 200);
    assert_eq!(steps(&from_reply), steps(&journey));
    assert_eq!(from_reply["steps"][0]["this_message"], false);
    assert_eq!(from_reply["steps"][10]["this_message"], true);

    // Nothing the customer wrote or is, nor the reply's text, in any step.
    let text = journey.to_string();
    for needle in [TEXT, "JOURNEYMARK", CUSTOMER, "Happy to help"] {
        assert!(!text.contains(needle), "{needle} in {text}");
    }
    let stored = db
        .count(&format!(
            "SELECT count(*) FROM message_journey
              WHERE detail::text LIKE '%JOURNEYMARK%' OR detail::text LIKE '%{CUSTOMER}%'"
        ))
        .await;
    assert_eq!(stored, 0);

    // Another org's admin, another conversation's path, a missing message: one 404.
    let stranger = app.org().await;
    let (status, body) = app
        .pod(1)
        .as_user(&stranger.token)
        .get(&path(inbound))
        .await;
    assert_eq!(
        (status, &body["code"]),
        (404, &json!("not_found")),
        "{body}"
    );
    let other = slack_message("UOTHER88", "1700000000.000200", "another question");
    let (status, _) = app.pod(0).send_webhook(&org.webhook("slack"), &other).await;
    assert_eq!(status, 200);
    db.wait_for_count("SELECT count(*) FROM drafts", 2).await;
    let elsewhere: Uuid = db
        .scalar(&format!(
            "SELECT conversation_id FROM messages WHERE conversation_id <> '{conversation}'"
        ))
        .await;
    let admin = app.pod(0).as_user(&org.token);
    let crossed = format!("/conversations/{elsewhere}/messages/{inbound}/journey");
    let (status, body) = admin.get(&crossed).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = admin.get(&path(Uuid::new_v4())).await;
    assert_eq!(
        (status, &body["code"]),
        (404, &json!("not_found")),
        "{body}"
    );
}
