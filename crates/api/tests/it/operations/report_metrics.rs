//! `GET /reports/metrics` on a small dataset with known times (messages per channel and
//! day, first-reply percentiles, SLA met, what the replies were made of, releases per
//! expert, days cut in the org's zone), who may read it, the ranges it refuses; and the
//! org's `sla_minutes`, which sets each new queue item's deadline.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::signing::slack_message;
use switchboard_testing::{TestApp, eventually, seed_item, seed_queue_items};
use uuid::Uuid;

/// Runs `sql` with `binds` (uuids) on the test database.
async fn exec(pool: &sqlx::PgPool, sql: &str, binds: &[Uuid]) {
    let mut q = sqlx::query(sql);
    for b in binds {
        q = q.bind(*b);
    }
    q.execute(pool).await.unwrap();
}

/// The conversation of a queue item.
async fn conversation(pool: &sqlx::PgPool, item: Uuid) -> Uuid {
    sqlx::query_scalar("SELECT conversation_id FROM expert_queue WHERE id = $1")
        .bind(item)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn report_metrics_count_a_fixed_dataset() {
    let app = TestApp::builder().no_workers().build().await;
    let org = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let pool = app.db.pool().await;
    let items = seed_queue_items(&app.db, org.id, org.conns["slack"], 3).await;
    // Each item is due at a known instant; the release records the deadline it met or missed.
    for (item, due) in items.iter().zip(["10:01:30", "10:01:30", "10:10:00"]) {
        sqlx::query("UPDATE expert_queue SET sla_due_at = $2::timestamptz WHERE id = $1")
            .bind(item)
            .bind(format!("2026-11-10T{due}Z"))
            .execute(&pool)
            .await
            .unwrap();
    }
    let admin = app.pod(0).as_user(&org.token);
    let by_expert = || app.pod(0).as_user(&expert.token);
    admin.release_ok(items[0], None).await;
    by_expert()
        .release_ok(items[1], Some("It ships on Monday."))
        .await;
    let (status, answer) = by_expert()
        .act(
            items[2],
            "respond",
            json!({"body": "Let me check with the warehouse."}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");

    // Every customer message at 10:00 UTC on 2026-11-10; the replies 60, 120 and 300 s later
    // (released, and so audited, at those instants); a second customer message 30 s before
    // the first reply.
    for (item, after) in items.iter().zip([60, 120, 300]) {
        let conv = conversation(&pool, *item).await;
        sqlx::query(
            "UPDATE messages SET created_at = CASE direction
                 WHEN 'inbound' THEN '2026-11-10T10:00:00Z'::timestamptz
                 ELSE '2026-11-10T10:00:00Z'::timestamptz + make_interval(secs => $2) END
             WHERE conversation_id = $1",
        )
        .bind(conv)
        .bind(after)
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "UPDATE audit_log SET created_at = '2026-11-10T10:00:00Z'::timestamptz
                                               + make_interval(secs => $2)
             WHERE target_id = $1 AND action IN ('queue_item.release', 'queue_item.respond')",
        )
        .bind(item)
        .bind(after)
        .execute(&pool)
        .await
        .unwrap();
    }
    let first = conversation(&pool, items[0]).await;
    exec(
        &pool,
        "INSERT INTO messages (org_id, conversation_id, direction, author, body, channel, created_at)
         SELECT org_id, id, 'inbound', 'customer', 'Also, the invoice?', channel,
                '2026-11-10T10:00:30Z' FROM conversations WHERE id = $1",
        &[first],
    )
    .await;
    // An unanswered WhatsApp message at 16:00 UTC: 2026-11-10 in UTC, 2026-11-11 in Tokyo.
    let whatsapp = seed_item(
        &app.db,
        org.id,
        "whatsapp",
        org.conns["whatsapp"],
        json!({}),
    )
    .await;
    let wa_conv = conversation(&pool, whatsapp).await;
    exec(
        &pool,
        "UPDATE messages SET created_at = '2026-11-10T16:00:00Z' WHERE conversation_id = $1",
        &[wa_conv],
    )
    .await;

    let url =
        |from: &str, to: &str| format!("/reports/metrics?org_id={}&from={from}&to={to}", org.id);
    let (status, m) = app
        .pod(0)
        .as_user(&org.token)
        .get(&url("2026-11-10", "2026-11-11"))
        .await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["time_zone"], "UTC");
    assert_eq!(m["sla_minutes"], 60);
    assert_eq!(
        m["messages"],
        json!([
            {"day": "2026-11-10", "channel": "slack", "inbound": 4, "outbound": 3},
            {"day": "2026-11-10", "channel": "whatsapp", "inbound": 1, "outbound": 0},
        ])
    );
    // Waits of 30, 60, 120 and 300 s; the WhatsApp message has no reply.
    let fr = &m["first_reply"];
    assert_eq!(fr.as_array().unwrap().len(), 1, "{fr}");
    assert_eq!(fr[0]["day"], "2026-11-10");
    assert_eq!(fr[0]["customer_messages"], 5);
    assert_eq!(fr[0]["answered"], 4);
    assert_eq!(fr[0]["p50_secs"].as_f64().unwrap().round(), 90.0);
    assert_eq!(fr[0]["p90_secs"].as_f64().unwrap().round(), 246.0);
    assert_eq!(
        m["releases"],
        json!([{"day": "2026-11-10", "releases": 3, "draft": 1, "edited": 1, "own": 1,
                "sla_met": 2, "sla_known": 3}])
    );
    let experts = m["experts"].as_array().unwrap();
    assert_eq!(experts.len(), 2, "{experts:?}");
    assert_eq!(experts[0]["user_id"], json!(expert.id));
    assert_eq!(experts[0]["email"], json!(expert.email));
    assert_eq!(experts[0]["releases"], 2);
    assert_eq!(experts[1]["releases"], 1);

    // A range without activity: empty lists, not an error.
    let (status, empty) = app
        .pod(0)
        .as_user(&org.token)
        .get(&url("2026-11-12", "2026-11-12"))
        .await;
    assert_eq!(status, 200);
    for list in ["messages", "first_reply", "releases", "experts"] {
        assert_eq!(empty[list], json!([]), "{list}");
    }

    // In Tokyo (UTC+9) the WhatsApp message falls on the next day, and a one-day range
    // ends at Tokyo's midnight.
    exec(
        &pool,
        "UPDATE orgs SET time_zone = 'Asia/Tokyo' WHERE id = $1",
        &[org.id],
    )
    .await;
    let (_, tokyo) = app
        .pod(0)
        .as_user(&org.token)
        .get(&url("2026-11-10", "2026-11-11"))
        .await;
    assert_eq!(tokyo["time_zone"], "Asia/Tokyo");
    let days: Vec<(&str, &str)> = tokyo["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["day"].as_str().unwrap(), r["channel"].as_str().unwrap()))
        .collect();
    assert_eq!(days, [("2026-11-10", "slack"), ("2026-11-11", "whatsapp")]);
    let (_, one_day) = app
        .pod(0)
        .as_user(&org.token)
        .get(&url("2026-11-10", "2026-11-10"))
        .await;
    assert_eq!(
        one_day["messages"].as_array().unwrap().len(),
        1,
        "{one_day}"
    );
    assert_eq!(one_day["first_reply"][0]["customer_messages"], 4);
    pool.close().await;
}

#[tokio::test]
async fn report_metrics_are_for_the_orgs_admins_and_refuse_bad_ranges() {
    let app = TestApp::builder().no_workers().build().await;
    let org = app.org().await;
    let other = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let path = format!("/reports/metrics?org_id={}", org.id);
    // Another org's admin and the org's own expert: 403; no token: 401.
    assert_eq!(app.pod(0).as_user(&other.token).get(&path).await.0, 403);
    assert_eq!(app.pod(0).as_user(&expert.token).get(&path).await.0, 403);
    assert_eq!(app.pod(0).status(&path).await, 401);

    // No range: the last seven days, today included.
    let (status, m) = app.pod(0).as_user(&org.token).get(&path).await;
    assert_eq!(status, 200, "{m}");
    let day =
        |v: &Value| chrono::NaiveDate::parse_from_str(v.as_str().unwrap(), "%Y-%m-%d").unwrap();
    assert_eq!((day(&m["to"]) - day(&m["from"])).num_days(), 6);
    assert_eq!(day(&m["to"]), chrono::Utc::now().date_naive());

    let bad = [
        "&from=2026-11-12&to=2026-11-10",
        "&from=2026-01-01&to=2026-04-03",
        "&from=2026-11-31&to=2026-12-01",
        "&from=yesterday",
        "&to=2026-13-01",
    ];
    for q in bad {
        let (status, body) = app
            .pod(0)
            .as_user(&org.token)
            .get(&format!("{path}{q}"))
            .await;
        assert_eq!(status, 422, "{q}: {body}");
        assert_eq!(body["code"], "validation_failed", "{q}: {body}");
    }
    assert_eq!(
        app.pod(0)
            .as_user(&org.token)
            .get("/reports/metrics")
            .await
            .0,
        422
    );
    // 92 days is the most (1 January to 2 April, both included).
    let (status, _) = app
        .pod(0)
        .as_user(&org.token)
        .get(&format!("{path}&from=2026-01-01&to=2026-04-03"))
        .await;
    assert_eq!(status, 422);
    let (status, body) = app
        .pod(0)
        .as_user(&org.token)
        .get(&format!("{path}&from=2026-01-01&to=2026-04-02"))
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn report_metrics_sla_minutes_set_the_deadline_of_new_items() {
    let app = TestApp::builder().fakes().build().await;
    let org = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let admin = || app.pod(0).as_user(&org.token);
    let settings = format!("/orgs/{}/settings", org.id);
    let (_, before) = admin().get(&settings).await;
    assert_eq!(before["sla_minutes"], 60);
    assert_eq!(
        admin()
            .patch(
                &settings,
                json!({"account_manager_email": "am@example.com"})
            )
            .await
            .0,
        200
    );
    // Out of bounds: 422; not a whole number: 400 (the body's shape); nothing changes.
    for (bad, want) in [
        (json!(0), 422),
        (json!(10081), 422),
        (json!(-5), 422),
        (json!("15"), 400),
        (json!(1.5), 400),
    ] {
        let (status, body) = admin().patch(&settings, json!({"sla_minutes": bad})).await;
        assert_eq!(status, want, "{bad}: {body}");
    }
    assert_eq!(admin().get(&settings).await.1["sla_minutes"], 60);
    // Experts may not change it.
    let (status, _) = app
        .pod(0)
        .as_user(&expert.token)
        .patch(&settings, json!({"sla_minutes": 5}))
        .await;
    assert_eq!(status, 403);
    let (status, set) = admin().patch(&settings, json!({"sla_minutes": 15})).await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["sla_minutes"], 15);
    // The other settings stay.
    assert_eq!(set["account_manager_email"], "am@example.com");
    assert_eq!(set["time_zone"], "UTC");
    let pool = app.db.pool().await;
    let audited: Value = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE action = 'org.settings_updated' AND org_id = $1
         ORDER BY id DESC LIMIT 1",
    )
    .bind(org.id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(audited["sla_minutes"], 15);

    // A customer message now makes an item due in 15 minutes.
    let path = org.webhook("slack");
    assert_eq!(
        app.pod(0)
            .send_webhook(&path, &slack_message("U1", "1700000100.000001", "Hi"))
            .await
            .0,
        200
    );
    let due_in = || async {
        sqlx::query_scalar::<_, f64>(
            "SELECT extract(epoch FROM sla_due_at - now())::float8 FROM expert_queue
             WHERE org_id = $1 AND status = 'pending'",
        )
        .bind(org.id)
        .fetch_optional(&pool)
        .await
        .unwrap()
    };
    let secs = eventually("a pending item", Duration::from_secs(20), due_in).await;
    assert!((840.0..=900.0).contains(&secs), "due in {secs} s");
    let item: Uuid = sqlx::query_scalar("SELECT id FROM expert_queue WHERE org_id = $1")
        .bind(org.id)
        .fetch_one(&pool)
        .await
        .unwrap();

    // Released, then the customer writes again: the item is pending with a new deadline,
    // not the one it had before the reply.
    admin().release_ok(item, None).await;
    sqlx::query("UPDATE expert_queue SET sla_due_at = now() - interval '1 day' WHERE id = $1")
        .bind(item)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        app.pod(0)
            .send_webhook(
                &path,
                &slack_message("U1", "1700000200.000001", "Thanks, and?")
            )
            .await
            .0,
        200
    );
    let renewed = || async {
        sqlx::query_scalar::<_, f64>(
            "SELECT extract(epoch FROM sla_due_at - now())::float8 FROM expert_queue
             WHERE id = $1 AND status = 'pending'",
        )
        .bind(item)
        .fetch_optional(&pool)
        .await
        .unwrap()
    };
    let secs = eventually(
        "the item is pending again",
        Duration::from_secs(20),
        renewed,
    )
    .await;
    assert!((840.0..=900.0).contains(&secs), "due in {secs} s");
    // The release recorded what it was made of and the deadline it was released against.
    let details: Value = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE action = 'queue_item.release' AND target_id = $1",
    )
    .bind(item)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(details["reply"], "draft");
    assert!(details["sla_due_at"].is_string(), "{details}");
    pool.close().await;
}

/// The autopilot's calibration on hand-counted releases: per confidence tenth, what experts
/// sent unchanged, edited (the median share of words changed) or replaced; what the org's
/// threshold would have sent of them; the autopilot's own sends left out.
#[tokio::test]
async fn report_metrics_calibrate_the_autopilot_on_a_hand_counted_set() {
    let app = TestApp::builder().no_workers().build().await;
    let pod = app.pod(0);
    let org = app.org().await;
    let pool = app.db.pool().await;
    let items = seed_queue_items(&app.db, org.id, org.conns["slack"], 6).await;
    // The seeded draft is "It ships tomorrow." (three words).
    let plan: [(f32, &str, Option<&str>); 6] = [
        (0.95, "release", None),
        (0.92, "release", Some("It ships Monday.")),
        (0.91, "respond", Some("Let me check with the warehouse.")),
        (0.45, "release", None),
        (0.45, "release", Some("It ships next week.")),
        (0.99, "release", None),
    ];
    for (item, (confidence, action, body)) in items.iter().zip(plan) {
        sqlx::query(
            "UPDATE drafts SET confidence = $2 WHERE id = (SELECT draft_id FROM expert_queue WHERE id = $1)",
        )
        .bind(item)
        .bind(confidence)
        .execute(&pool)
        .await
        .unwrap();
        let body = json!({"body": body.unwrap_or("It ships tomorrow.")});
        let (status, answer) = pod
            .as_user(&org.token)
            .post(&format!("/expert-queue/{item}/{action}"), body)
            .await;
        assert_eq!(status, 200, "{answer}");
    }
    // The last one stands for a send of the autopilot's.
    exec(
        &pool,
        "UPDATE audit_log SET details = details || '{\"by\": \"autopilot\"}' WHERE target_id = $1",
        &[items[5]],
    )
    .await;
    let policy = json!({"enabled": false,
        "channels": {"slack": {"enabled": true, "min_confidence": 0.9}}});
    let path = format!("/orgs/{}/autopilot", org.id);
    assert_eq!(pod.as_user(&org.token).put(&path, policy).await.0, 200);

    let (status, m) = pod
        .as_user(&org.token)
        .get(&format!("/reports/metrics?org_id={}", org.id))
        .await;
    assert_eq!(status, 200, "{m}");
    let buckets = m["calibration"].as_array().unwrap();
    assert_eq!(buckets.len(), 2, "{m}");
    let (low, high) = (&buckets[0], &buckets[1]);
    assert_eq!(low["channel"], "slack");
    assert_eq!(low["from"], 0.4);
    assert_eq!(
        (
            &low["drafts"],
            &low["unchanged"],
            &low["edited"],
            &low["replaced"]
        ),
        (&json!(2), &json!(1), &json!(1), &json!(0))
    );
    let share = |b: &Value| b["median_edit_share"].as_f64().unwrap();
    assert!((share(low) - 2.0 / 3.0).abs() < 1e-9, "{low}");
    assert_eq!(high["from"], 0.9);
    assert_eq!(
        (
            &high["drafts"],
            &high["unchanged"],
            &high["edited"],
            &high["replaced"]
        ),
        (&json!(3), &json!(1), &json!(1), &json!(1)),
        "the autopilot's own send is not counted"
    );
    assert!((share(high) - 1.0 / 3.0).abs() < 1e-9, "{high}");
    assert_eq!(
        m["autopilot"],
        json!([{"channel": "slack", "min_confidence": 0.9, "enabled": false,
                "would_send": 3, "changed": 2}])
    );
    assert!(
        m["experts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["user_id"] != Value::Null),
        "the autopilot is no expert: {m}"
    );
}
