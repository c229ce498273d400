//! The expert API: the queue list, the actions and their state machine, F3 release across
//! pods, faults inside the release transaction, Idempotency-Key, and org scoping.

use futures::future::join_all;
use serde_json::{Value, json};
use std::collections::HashSet;
use switchboard_domain::Role;
use switchboard_domain::faults::{Fault, Step};
use switchboard_testing::socket::connect_with;
use switchboard_testing::{TestApp, TestPod, seed_member, seed_queue_items};
use uuid::Uuid;

/// Two pods on one database and Redis, an org with an admin and two experts.
struct Org {
    app: TestApp,
    org: Uuid,
    admin: String,
    expert: String,
    expert_id: Uuid,
    other_expert: String,
    connection: Uuid,
}

impl Org {
    async fn start() -> Org {
        // No workers: what a release pushes stays in the queue where the tests count it.
        let app = TestApp::builder().pods(2).no_workers().build().await;
        let admin = app.member(None, Role::Admin).await;
        let expert = app.member(Some(admin.org), Role::Expert).await;
        let other = app.member(Some(admin.org), Role::Expert).await;
        let other_expert = app.pod(1).login(&other.email, &other.password).await;
        let connection = app
            .pod(0)
            .as_user(&admin.token)
            .create_connection(admin.org, "slack")
            .await;
        Org {
            org: admin.org,
            admin: admin.token,
            expert: expert.token,
            expert_id: expert.id,
            other_expert,
            connection,
            app,
        }
    }

    fn a(&self) -> &TestPod {
        self.app.pod(0)
    }

    fn b(&self) -> &TestPod {
        self.app.pod(1)
    }

    /// Seeds `n` pending items (each with its customer, conversation, inbound message and
    /// draft) created one millisecond apart, the newest now; returns their ids, oldest first.
    async fn seed_items(&self, n: i64) -> Vec<Uuid> {
        seed_queue_items(&self.app.db, self.org, self.connection, n).await
    }

    async fn count(&self, sql: &str) -> i64 {
        self.app.db.count(sql).await
    }
}

/// Jobs waiting in the `channel-outbound` queue (scheduled, parked or active).
async fn outbound_jobs(pod: &TestPod) -> usize {
    let queue = pod.server.state().flows.outbound.queue_ref();
    switchboard_jobs::queue::upkeep::depth(&queue)
        .await
        .unwrap()
        .total()
}

#[tokio::test]
async fn ten_concurrent_releases_over_two_pods_send_one_reply() {
    let org = Org::start().await;
    let item = org.seed_items(1).await[0];
    let tokens = [&org.expert, &org.other_expert, &org.admin];
    let releases = (0..10).map(|i| {
        let pod = if i % 2 == 0 { org.a() } else { org.b() };
        pod.as_user(tokens[i % 3]).act(item, "release", json!({}))
    });
    let results = join_all(releases).await;
    let ok: Vec<&(u16, Value)> = results.iter().filter(|(s, _)| *s == 200).collect();
    let conflicts = results.iter().filter(|(s, _)| *s == 409).count();
    assert_eq!((ok.len(), conflicts), (1, 9), "{results:?}");
    let refused = results.iter().find(|(s, _)| *s == 409).unwrap();
    assert_eq!(refused.1["code"], "conflict");
    assert_eq!(refused.1["current"]["status"], "awaiting_client");
    assert_eq!(
        org.count("SELECT count(*) FROM messages WHERE direction = 'outbound'")
            .await,
        1
    );
    assert_eq!(org.count("SELECT count(*) FROM outbox").await, 1);
    assert_eq!(outbound_jobs(org.a()).await, 1);
    let released = &ok[0].1;
    assert_eq!(released["item"]["status"], "awaiting_client");
    assert_eq!(released["message"]["body"], "It ships tomorrow.");
    assert_eq!(released["message"]["author"], "agent");
    assert_eq!(released["message"]["delivery_status"], "queued");
    let payload: Value = {
        let pool = org.app.db.pool().await;
        sqlx::query_scalar("SELECT payload FROM outbox")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(payload["text"], "It ships tomorrow.");
    assert_eq!(payload["reply_to"]["thread_ts"], "1.5");
    assert_eq!(
        org.count("SELECT count(*) FROM audit_log WHERE action = 'queue_item.release' AND request_id IS NOT NULL").await,
        1
    );
}

#[tokio::test]
async fn an_edited_release_and_a_respond_are_the_experts_words() {
    let org = Org::start().await;
    let expert = org.a().as_user(&org.expert);
    let expert_b = org.b().as_user(&org.expert);
    let items = org.seed_items(2).await;
    let (s, edited) = expert
        .act(items[0], "release", json!({"body": "Tomorrow, by noon."}))
        .await;
    assert_eq!(s, 200, "{edited}");
    assert_eq!(edited["message"]["author"], "expert");
    assert_eq!(edited["message"]["body"], "Tomorrow, by noon.");
    let (s, own) = expert_b
        .act(items[1], "respond", json!({"body": "Let me check."}))
        .await;
    assert_eq!(s, 200, "{own}");
    assert_eq!(own["message"]["author"], "expert");
    // Bad input changes nothing.
    for (action, body) in [
        ("respond", json!({})),
        ("respond", json!({"body": "  "})),
        ("release", json!({"body": ""})),
    ] {
        let fresh = org.seed_items(1).await[0];
        let (s, e) = expert.act(fresh, action, body.clone()).await;
        assert_eq!(s, 422, "{action} {body}: {e}");
        let (_, item) = expert.get(&format!("/expert-queue/{fresh}")).await;
        assert_eq!(item["status"], "pending");
    }
    let (s, e) = expert
        .post(
            &format!("/expert-queue/{}/release", items[0]),
            json!("nope"),
        )
        .await;
    assert_eq!((s, e["code"].as_str()), (400, Some("invalid_json")));
    // The conversation shows the reply with its delivery status, newest first.
    let conversation = edited["item"]["conversation_id"].as_str().unwrap();
    let (s, view) = expert.get(&format!("/conversations/{conversation}")).await;
    assert_eq!(s, 200, "{view}");
    assert_eq!(view["messages"][0]["direction"], "outbound");
    assert_eq!(view["messages"][0]["delivery"]["status"], "queued");
    assert_eq!(view["messages"][1]["direction"], "inbound");
    assert_eq!(view["queue_item"]["status"], "awaiting_client");
    assert_eq!(
        view["customer"]["external_id"]
            .as_str()
            .map(|s| !s.is_empty()),
        Some(true)
    );
}

#[tokio::test]
async fn a_fault_at_any_step_of_the_release_leaves_nothing_behind() {
    let org = Org::start().await;
    let expert = org.a().as_user(&org.expert);
    let item = org.seed_items(1).await[0];
    let faults = &org.a().server.state().flows.faults;
    let audit_before = org.count("SELECT count(*) FROM audit_log").await;
    for step in [Step::AfterTransition, Step::AfterOutbox, Step::AfterEvents] {
        faults.arm(step, Fault::Fail);
        let (s, e) = expert.act(item, "release", json!({})).await;
        assert_eq!(s, 500, "{step:?}: {e}");
        assert_eq!(
            org.count("SELECT count(*) FROM messages WHERE direction = 'outbound'")
                .await,
            0,
            "{step:?}"
        );
        assert_eq!(
            org.count("SELECT count(*) FROM outbox").await,
            0,
            "{step:?}"
        );
        assert_eq!(
            org.count("SELECT count(*) FROM event_outbox").await
                + org.count("SELECT count(*) FROM events").await,
            0,
            "{step:?}"
        );
        assert_eq!(
            org.count("SELECT count(*) FROM audit_log").await,
            audit_before,
            "{step:?}"
        );
        let (_, now) = expert.get(&format!("/expert-queue/{item}")).await;
        assert_eq!(
            (now["status"].as_str(), now["version"].as_i64()),
            (Some("pending"), Some(1)),
            "{step:?}"
        );
    }
    faults.disarm();
    let (s, _) = expert.act(item, "release", json!({})).await;
    assert_eq!(s, 200);
    assert_eq!(outbound_jobs(org.a()).await, 1);
}

#[tokio::test]
async fn the_state_machine_refuses_every_illegal_transition_with_the_current_state() {
    let org = Org::start().await;
    let expert = org.a().as_user(&org.expert);
    let expert_b = org.b().as_user(&org.expert);
    let other_b = org.b().as_user(&org.other_expert);
    let admin = org.a().as_user(&org.admin);
    let items = org.seed_items(3).await;
    let future = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    // pending: unclaim and reopen are illegal.
    for action in ["unclaim", "reopen"] {
        let (s, e) = expert.act(items[0], action, json!({})).await;
        assert_eq!(s, 409, "{action}: {e}");
        assert_eq!(
            e["current"],
            json!({"status": "pending", "version": 1, "claimed_by": null})
        );
    }
    // Claimed by the expert: the same expert again is a no-op 200; the other one gets 409
    // for claim, release, respond, snooze and resolve.
    let (s, claimed) = expert.act(items[0], "claim", json!({})).await;
    assert_eq!(
        (s, claimed["item"]["status"].as_str()),
        (200, Some("claimed"))
    );
    let (s, again) = expert_b.act(items[0], "claim", json!({})).await;
    assert_eq!(
        (s, again["item"]["version"].as_i64()),
        (200, Some(2)),
        "{again}"
    );
    for (action, body) in [
        ("claim", json!({})),
        ("release", json!({})),
        ("respond", json!({"body": "x"})),
        ("snooze", json!({"until": future})),
        ("resolve", json!({})),
        ("unclaim", json!({})),
    ] {
        let (s, e) = other_b.act(items[0], action, body).await;
        assert_eq!(s, 409, "{action}: {e}");
        assert_eq!(e["current"]["claimed_by"], json!(org.expert_id), "{action}");
        assert_eq!(e["current"]["status"], "claimed");
    }
    // An admin may take it back.
    let (s, _) = admin.act(items[0], "unclaim", json!({})).await;
    assert_eq!(s, 200);
    // Snooze must be in the future; then snoozed → reopen → pending.
    let past = (chrono::Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    let (s, _) = expert.act(items[1], "snooze", json!({"until": past})).await;
    assert_eq!(s, 422);
    let (s, snoozed) = expert
        .act(items[1], "snooze", json!({"until": future}))
        .await;
    assert_eq!(
        (s, snoozed["item"]["status"].as_str()),
        (200, Some("snoozed"))
    );
    for action in ["claim", "release", "unclaim"] {
        let (s, e) = expert.act(items[1], action, json!({})).await;
        assert_eq!(
            (s, e["current"]["status"].as_str()),
            (409, Some("snoozed")),
            "{action}"
        );
    }
    let (s, _) = expert.act(items[1], "reopen", json!({})).await;
    assert_eq!(s, 200);
    // resolved: only reopen.
    let (s, _) = expert.act(items[2], "resolve", json!({})).await;
    assert_eq!(s, 200);
    for action in ["claim", "release", "resolve", "snooze", "unclaim"] {
        let (s, e) = expert.act(items[2], action, json!({"until": future})).await;
        assert_eq!(
            (s, e["current"]["status"].as_str()),
            (409, Some("resolved")),
            "{action}"
        );
    }
    let (s, reopened) = expert.act(items[2], "reopen", json!({})).await;
    assert_eq!(
        (s, reopened["item"]["status"].as_str()),
        (200, Some("pending"))
    );
    // Assign is for admins, to members only.
    let (s, _) = expert
        .act(items[2], "assign", json!({"user_id": org.expert_id}))
        .await;
    assert_eq!(s, 403);
    let (s, _) = admin
        .act(items[2], "assign", json!({"user_id": Uuid::new_v4()}))
        .await;
    assert_eq!(s, 422);
    let (s, assigned) = admin
        .act(items[2], "assign", json!({"user_id": org.expert_id}))
        .await;
    assert_eq!(
        (s, assigned["item"]["claimed_by"].clone()),
        (200, json!(org.expert_id))
    );
    // awaiting_client after a release: release again → 409; a customer message (F2) and
    // reopen bring it back.
    let (s, _) = expert.act(items[2], "release", json!({})).await;
    assert_eq!(s, 200);
    let (s, e) = expert.act(items[2], "release", json!({})).await;
    assert_eq!(
        (s, e["current"]["status"].as_str()),
        (409, Some("awaiting_client"))
    );
    let (_, mine) = expert.get("/expert-queue?assigned=me&status=all").await;
    assert!(mine["items"].as_array().unwrap().is_empty(), "{mine}");
}

#[tokio::test]
async fn pages_hold_every_item_exactly_once_while_new_ones_arrive() {
    let org = Org::start().await;
    let expert = org.a().as_user(&org.expert);
    let seeded = org.seed_items(250).await;
    let mut seen: Vec<Uuid> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/expert-queue?limit=50&cursor={c}"),
            None => "/expert-queue?limit=50".to_owned(),
        };
        let pod = if pages % 2 == 0 { org.a() } else { org.b() };
        let (s, page) = pod.as_user(&org.expert).get(&path).await;
        assert_eq!(s, 200, "{page}");
        for item in page["items"].as_array().unwrap() {
            seen.push(item["id"].as_str().unwrap().parse().unwrap());
        }
        pages += 1;
        if pages <= 4 {
            // 20 new items arrive while the expert pages.
            org.seed_items(5).await;
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    let unique: HashSet<&Uuid> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "an item was repeated");
    assert_eq!(seen.len(), 270, "every item, old and new, exactly once");
    assert_eq!(&seen[..250], &seeded[..], "longest waiting first");
    // A row carries what the console shows.
    let (_, first) = expert.get("/expert-queue?limit=1").await;
    let row = &first["items"][0];
    for field in [
        "id",
        "status",
        "version",
        "channel",
        "conversation_id",
        "customer",
        "last_message",
        "draft",
        "flagged",
        "claimed_by",
        "snoozed_until",
        "sla_due_at",
        "updated_at",
    ] {
        assert!(row.get(field).is_some(), "{field} missing from {row}");
    }
    assert_eq!(row["draft"]["fallback"], false);
    assert_eq!(row["last_message"]["preview"], "Where is my order?");
    // Filters and bad input.
    let (_, recent) = expert.get("/expert-queue?order=recent&limit=1").await;
    assert_ne!(recent["items"][0]["id"], row["id"]);
    for bad in [
        "status=nope",
        "channel=fax",
        "assigned=someone",
        "order=random",
        "limit=0",
        "cursor=garbage",
    ] {
        let (s, e) = expert.get(&format!("/expert-queue?{bad}")).await;
        assert!(s == 400 || s == 422, "{bad}: {s} {e}");
    }
}

#[tokio::test]
async fn an_idempotency_key_replays_the_first_answer_from_any_pod() {
    let org = Org::start().await;
    let expert = org.a().as_user(&org.expert);
    let expert_b = org.b().as_user(&org.expert);
    let other = org.a().as_user(&org.other_expert);
    let other_b = org.b().as_user(&org.other_expert);
    let items = org.seed_items(2).await;
    let path = format!("/expert-queue/{}/release", items[0]);
    let (s1, first) = expert
        .post_with_key(&path, json!({"body": "Hi!"}), "k-1")
        .await;
    let (s2, replay) = expert_b
        .post_with_key(&path, json!({"body": "Hi!"}), "k-1")
        .await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(first, replay);
    let (s, e) = expert_b
        .post_with_key(&path, json!({"body": "Other"}), "k-1")
        .await;
    assert_eq!((s, e["code"].as_str()), (422, Some("idempotency_mismatch")));
    assert_eq!(org.count("SELECT count(*) FROM outbox").await, 1);
    // Concurrent requests with one key: one effect; the others replay or are told to wait.
    let path = format!("/expert-queue/{}/release", items[1]);
    let results = join_all((0..6).map(|i| {
        let pod = if i % 2 == 0 { org.a() } else { org.b() };
        pod.as_user(&org.expert)
            .post_with_key(&path, json!({}), "k-2")
    }))
    .await;
    for (s, body) in &results {
        assert!(
            *s == 200 || (*s == 409 && body["code"] == "idempotency_in_progress"),
            "{s} {body}"
        );
    }
    assert_eq!(org.count("SELECT count(*) FROM outbox").await, 2);
    // A refusal is an answer too: the replay of a 409 is the same 409.
    let (s, conflict) = other.post_with_key(&path, json!({}), "k-3").await;
    let (s2, again) = other_b.post_with_key(&path, json!({}), "k-3").await;
    assert_eq!((s, s2), (409, 409));
    assert_eq!(conflict, again);
    // Keys are per user: another expert's same key is a new request.
    let (s, e) = other.post_with_key(&path, json!({}), "k-1").await;
    assert_eq!((s, e["code"].as_str()), (409, Some("conflict")));
    let (s, e) = expert
        .post_with_key(&path, json!({}), &"x".repeat(300))
        .await;
    assert_eq!(
        (s, e["code"].as_str()),
        (400, Some("invalid_idempotency_key"))
    );
}

#[tokio::test]
async fn another_orgs_items_are_forbidden_and_admin_routes_refuse_experts() {
    let org = Org::start().await;
    let expert = org.a().as_user(&org.expert);
    let item = org.seed_items(1).await[0];
    let (s, conversation) = expert.get(&format!("/expert-queue/{item}")).await;
    assert_eq!(s, 200);
    let conversation = conversation["conversation_id"].as_str().unwrap().to_owned();
    let (_, email, password) = seed_member(&org.app.db, None, Role::Admin).await;
    let stranger = org.a().login(&email, &password).await;
    for path in [
        format!("/expert-queue/{item}"),
        format!("/conversations/{conversation}"),
        format!("/expert-queue?org_id={}", org.org),
        format!("/conversations?org_id={}", org.org),
    ] {
        let (s, e) = org.a().as_user(&stranger).get(&path).await;
        assert_eq!((s, e["code"].as_str()), (403, Some("forbidden")), "{path}");
    }
    for action in [
        "claim", "unclaim", "assign", "release", "respond", "resolve", "snooze", "reopen",
    ] {
        let body = json!({"user_id": org.expert_id, "body": "x", "until": "2999-01-01T00:00:00Z"});
        let (s, e) = org.a().as_user(&stranger).act(item, action, body).await;
        assert_eq!(
            (s, e["code"].as_str()),
            (403, Some("forbidden")),
            "{action}"
        );
    }
    // The stranger's own lists are empty; unknown ids are 404.
    let (_, own) = org.a().as_user(&stranger).get("/expert-queue").await;
    assert_eq!(own["items"], json!([]));
    let (s, _) = expert
        .get(&format!("/expert-queue/{}", Uuid::new_v4()))
        .await;
    assert_eq!(s, 404);
    let (s, _) = expert.act(Uuid::new_v4(), "claim", json!({})).await;
    assert_eq!(s, 404);
    let (s, _) = expert
        .get(&format!("/conversations/{}", Uuid::new_v4()))
        .await;
    assert_eq!(s, 404);
    let (s, _) = expert
        .act(item, "assign", json!({"user_id": org.expert_id}))
        .await;
    assert_eq!(s, 403);
    // Nothing was touched.
    let (_, now) = expert.get(&format!("/expert-queue/{item}")).await;
    assert_eq!(now["version"], 1);
    let (s, _) = org.a().as_user("not-a-token").get("/expert-queue").await;
    assert_eq!(s, 401);
}

#[tokio::test]
async fn a_release_reaches_a_socket_on_the_other_pod_in_order() {
    let org = Org::start().await;
    let expert = org.a().as_user(&org.expert);
    let item = org.seed_items(1).await[0];
    let mut sock = connect_with(org.b(), &org.expert).await;
    let (s, _) = expert.act(item, "release", json!({})).await;
    assert_eq!(s, 200);
    let events = sock.take(3).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "queue_item_updated",
            "message_created",
            "agent_message_sent"
        ]
    );
    let seqs: Vec<i64> = events
        .iter()
        .map(|(_, d)| d["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3]);
    let sent = &events[2].1;
    assert_eq!(sent["queue_item_id"], json!(item));
    assert_eq!(sent["message"]["delivery_status"], "queued");
    assert_eq!(sent["org_id"], json!(org.org));
    sock.close().await;
}
