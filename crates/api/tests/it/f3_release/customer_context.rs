//! Customer context: `GET /customers/{id}/conversations` lists the customer's conversations
//! (newest activity first, with their outcome, channel and last message time), pages them,
//! and is scoped to the caller's orgs.

use serde_json::json;
use switchboard_domain::Role;
use switchboard_testing::{TestApp, seed_item};
use uuid::Uuid;

#[tokio::test]
async fn customer_context_lists_the_customers_conversations_scoped_to_the_org() {
    let app = TestApp::builder().no_workers().build().await;
    let pod = app.pod(0);
    let org = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let other_org = app.org().await;
    let outsider = app.member(Some(other_org.id), Role::Expert).await;
    let conn = org.conns["slack"];
    let item = seed_item(&app.db, org.id, "slack", conn, json!({"channel": "C1"})).await;
    // Someone else's conversation in the same org: never in this customer's list.
    seed_item(&app.db, org.id, "slack", conn, json!({"channel": "C1"})).await;
    let pool = app.db.pool().await;
    let (customer, current): (Uuid, Uuid) = sqlx::query_as(
        "SELECT c.customer_id, c.id FROM expert_queue q
         JOIN conversations c ON c.id = q.conversation_id WHERE q.id = $1",
    )
    .bind(item)
    .fetch_one(&pool)
    .await
    .unwrap();
    // An earlier conversation of the same customer, closed and resolved a day ago.
    let earlier: Uuid = sqlx::query_scalar(
        "WITH conv AS (
           INSERT INTO conversations (org_id, customer_id, channel, connection_id, status,
                                      created_at, updated_at, closed_at)
           VALUES ($1, $2, 'slack', $3, 'closed', now() - interval '2 days',
                   now() - interval '1 day', now() - interval '1 day')
           RETURNING id
         ), msg AS (
           INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                                 created_at)
           SELECT $1, id, 'inbound', 'customer', 'Hello again', 'slack',
                  now() - interval '1 day 1 hour' FROM conv
         ), item AS (
           INSERT INTO expert_queue (org_id, conversation_id, status, resolved_at)
           SELECT $1, id, 'resolved', now() - interval '1 day' FROM conv
         )
         SELECT id FROM conv",
    )
    .bind(org.id)
    .bind(customer)
    .bind(conn)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;

    let path = format!("/customers/{customer}/conversations");
    let (status, body) = pod.as_user(&expert.token).get(&path).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["customer"]["id"], json!(customer));
    assert_eq!(body["customer"]["channel"], "slack");
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{body}");
    assert_eq!(items[0]["id"], json!(current));
    assert_eq!(items[0]["outcome"], "pending");
    assert_eq!(items[0]["queue_item_id"], json!(item));
    assert_eq!(items[0]["status"], "open");
    assert!(items[0]["last_message_at"].is_string(), "{body}");
    assert_eq!(items[1]["id"], json!(earlier));
    assert_eq!(items[1]["outcome"], "resolved");
    assert_eq!(items[1]["status"], "closed");
    assert_eq!(items[1]["channel"], "slack");
    assert!(items[1]["queue_item_id"].is_null());
    assert!(items[1]["last_message_at"].is_string(), "{body}");
    assert!(body["next_cursor"].is_null());

    // Pages: one at a time, the cursor leads to the earlier conversation.
    let (status, first) = pod
        .as_user(&expert.token)
        .get(&format!("{path}?limit=1"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(first["items"][0]["id"], json!(current));
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (status, second) = pod
        .as_user(&expert.token)
        .get(&format!("{path}?limit=1&cursor={cursor}"))
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["items"][0]["id"], json!(earlier));
    assert!(second["next_cursor"].is_null());

    // Scoping and bad input.
    let (status, body) = pod.as_user(&outsider.token).get(&path).await;
    assert_eq!(status, 403, "another org's customer: {body}");
    let (status, _) = pod
        .as_user(&expert.token)
        .get(&format!("/customers/{}/conversations", Uuid::new_v4()))
        .await;
    assert_eq!(status, 404);
    let (status, body) = pod
        .as_user(&expert.token)
        .get(&format!("{path}?limit=0"))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["code"], "validation_failed");
    let (status, _) = pod
        .as_user(&expert.token)
        .get(&format!("{path}?cursor=junk"))
        .await;
    assert!(status == 400 || status == 422, "bad cursor: {status}");
    let (status, _) = pod
        .as_user(&expert.token)
        .get("/customers/not-a-uuid/conversations")
        .await;
    assert!(status == 400 || status == 422 || status == 404, "{status}");
    assert_eq!(pod.get(&path).await.status().as_u16(), 401);
}
