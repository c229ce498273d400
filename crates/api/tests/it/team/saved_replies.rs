//! Saved replies: admins create, rename, edit and delete them; experts list them; a body
//! naming a placeholder the console cannot fill is refused (422 naming it) and changes
//! nothing; another org's saved replies are out of reach.

use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::TestApp;

fn path(org: uuid::Uuid) -> String {
    format!("/orgs/{org}/saved-replies")
}

#[tokio::test]
async fn saved_replies_admins_manage_them_experts_list_them_and_every_change_is_audited() {
    let app = TestApp::builder().pods(2).no_workers().build().await;
    let admin = app.member(None, Role::Admin).await;
    let expert = app.member(Some(admin.org), Role::Expert).await;
    let (a, b) = (
        app.pod(0).as_user(&admin.token),
        app.pod(1).as_user(&expert.token),
    );
    let list = path(admin.org);

    let (status, empty) = b.get(&list).await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty["items"], json!([]));
    assert_eq!(
        empty["placeholders"],
        json!([
            "customer.name",
            "customer.first_name",
            "expert.name",
            "expert.first_name"
        ])
    );

    let body = "Hi {{customer.first_name}}, this is {{ expert.name }}. Your refund is on its way.";
    let (status, created) = a
        .post(&list, json!({"name": "  Refund sent ", "body": body}))
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "Refund sent", "the name is trimmed");
    assert_eq!(created["body"], body, "the body is stored unfilled");
    assert_eq!(created["created_by"], json!(admin.id));
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, second) = a
        .post(
            &list,
            json!({"name": "Apology", "body": "Sorry, {{customer.name}}."}),
        )
        .await;
    assert_eq!(status, 201, "{second}");

    let (status, listed) = b.get(&list).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Apology", "Refund sent"], "by name: {listed}");

    let one = format!("{list}/{id}");
    let (status, renamed) = a.patch(&one, json!({"name": "Refund issued"})).await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["name"], "Refund issued");
    assert_eq!(renamed["body"], body, "the body is kept");
    let (status, edited) = a
        .patch(&one, json!({"body": "Done, {{customer.name}}."}))
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["name"], "Refund issued");
    assert_eq!(edited["body"], "Done, {{customer.name}}.");

    assert_eq!(app.pod(1).as_user(&admin.token).delete(&one).await, 204);
    assert_eq!(a.delete(&one).await, 404, "already gone");
    let (_, after) = b.get(&list).await;
    assert_eq!(after["items"].as_array().unwrap().len(), 1, "{after}");

    let actions = app
        .db
        .count(&format!(
            "SELECT count(*) FROM audit_log WHERE target_id = '{id}' AND actor_user_id = '{}'
               AND action IN ('saved_reply.created', 'saved_reply.updated', 'saved_reply.deleted')",
            admin.id
        ))
        .await;
    assert_eq!(actions, 4, "created, updated twice, deleted");
}

#[tokio::test]
async fn saved_replies_refuse_unknown_placeholders_and_bad_input_changing_nothing() {
    let app = TestApp::builder().no_workers().build().await;
    let admin = app.member(None, Role::Admin).await;
    let a = app.pod(0).as_user(&admin.token);
    let list = path(admin.org);
    let stored = || app.db.count("SELECT count(*) FROM saved_replies");
    let audited = || {
        app.db
            .count("SELECT count(*) FROM audit_log WHERE action LIKE 'saved_reply.%'")
    };

    let (status, refused) = a
        .post(
            &list,
            json!({"name": "Order", "body": "Hi {{customer.name}}, order {{order.id}} ships {{ship_date}}; {{order.id}}"}),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["code"], "validation_failed");
    assert_eq!(
        refused["unknown_placeholders"],
        json!(["order.id", "ship_date"])
    );
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("{{order.id}}") && message.contains("{{ship_date}}"),
        "the message names them: {message}"
    );
    let named = message.split("; known").next().unwrap();
    assert!(
        !named.contains("customer.name"),
        "a known placeholder is not named as unknown: {message}"
    );

    let bad: [(Value, u16); 7] = [
        (json!({"name": "x", "body": "Hi {{customer.name"}), 422),
        (json!({"name": "  ", "body": "Hello"}), 422),
        (json!({"name": "x", "body": "   "}), 422),
        (json!({"name": "x".repeat(101), "body": "Hello"}), 422),
        (json!({"name": "x", "body": "y".repeat(4001)}), 422),
        (json!({"name": "x"}), 400),
        (
            json!({"name": "x", "body": "Hello", "org_id": admin.org}),
            400,
        ),
    ];
    for (body, want) in bad {
        let (status, answer) = a.post(&list, body.clone()).await;
        assert_eq!(status, want, "{body}: {answer}");
    }
    assert_eq!(stored().await, 0, "nothing refused is stored");
    assert_eq!(audited().await, 0, "nothing refused is audited");

    let (status, created) = a
        .post(
            &list,
            json!({"name": "Greeting", "body": "Hello {{customer.name}}"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, taken) = a
        .post(&list, json!({"name": "GREETING", "body": "Hi"}))
        .await;
    assert_eq!(
        status, 409,
        "a name is one reply per org, whatever its case: {taken}"
    );
    let one = format!("{list}/{}", created["id"].as_str().unwrap());
    for body in [
        json!({"body": "Hello {{customer.nickname}}"}),
        json!({}),
        json!({"name": ""}),
    ] {
        let (status, answer) = a.patch(&one, body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
    }
    let (status, patched) = a
        .patch(&one, json!({"name": "Renamed", "body": "{{nope}}"}))
        .await;
    assert_eq!(status, 422, "{patched}");
    assert_eq!(patched["unknown_placeholders"], json!(["nope"]));
    let (_, listed) = a.get(&list).await;
    assert_eq!(
        listed["items"][0]["name"], "Greeting",
        "unchanged: {listed}"
    );
    assert_eq!(listed["items"][0]["body"], "Hello {{customer.name}}");
    assert_eq!(stored().await, 1);
    assert_eq!(audited().await, 1, "only the create");
}

#[tokio::test]
async fn saved_replies_are_scoped_to_their_org_and_managed_by_its_admins_only() {
    let app = TestApp::builder().no_workers().build().await;
    let admin = app.member(None, Role::Admin).await;
    let expert = app.member(Some(admin.org), Role::Expert).await;
    let other_admin = app.member(None, Role::Admin).await;
    let pod = app.pod(0);
    let list = path(admin.org);
    let (status, created) = pod
        .as_user(&admin.token)
        .post(
            &list,
            json!({"name": "Hello", "body": "Hello {{customer.name}}"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let one = format!("{list}/{id}");

    // An expert lists but does not manage.
    let e = pod.as_user(&expert.token);
    assert_eq!(e.get(&list).await.0, 200);
    assert_eq!(
        e.post(&list, json!({"name": "Mine", "body": "Hi"})).await.0,
        403
    );
    assert_eq!(e.patch(&one, json!({"name": "Mine"})).await.0, 403);
    assert_eq!(e.delete(&one).await, 403);

    // Another org's admin: 403 on this org's paths, and this org's id under their own org
    // finds nothing.
    let o = pod.as_user(&other_admin.token);
    assert_eq!(o.get(&list).await.0, 403);
    assert_eq!(
        o.post(&list, json!({"name": "X", "body": "Hi"})).await.0,
        403
    );
    assert_eq!(o.patch(&one, json!({"name": "X"})).await.0, 403);
    assert_eq!(o.delete(&one).await, 403);
    let theirs = format!("{}/{id}", path(other_admin.org));
    assert_eq!(o.patch(&theirs, json!({"name": "X"})).await.0, 404);
    assert_eq!(o.delete(&theirs).await, 404);
    let (_, own) = o.get(&path(other_admin.org)).await;
    assert_eq!(own["items"], json!([]), "{own}");
    // The same name in another org is another reply.
    let (status, _) = o
        .post(
            &path(other_admin.org),
            json!({"name": "Hello", "body": "Hi"}),
        )
        .await;
    assert_eq!(status, 201);

    let (_, listed) = pod.as_user(&admin.token).get(&list).await;
    assert_eq!(listed["items"][0]["name"], "Hello", "{listed}");
    assert_eq!(listed["items"][0]["body"], "Hello {{customer.name}}");
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(pod.as_user("not-a-token").get(&list).await.0, 401);
}
