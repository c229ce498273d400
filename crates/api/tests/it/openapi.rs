//! `/openapi.json`: an OpenAPI 3.1 document that matches the router both ways.

use serde_json::Value;
use switchboard_testing::TestPod;

/// The document's (method, path) pairs.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                out.push((method.to_owned(), path.clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_document_covers_every_route_and_every_documented_route_exists() {
    let (pod, _db) = TestPod::single().await;
    let r = pod
        .client
        .get(pod.url("/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let doc: Value = r.json().await.unwrap();
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    let ops = operations(&doc);
    for (method, path) in [
        ("post", "/auth/login"),
        ("get", "/expert-queue"),
        ("post", "/expert-queue/{id}/release"),
        ("get", "/conversations/{id}"),
        ("post", "/webhooks/{channel}/{connection_id}"),
        ("get", "/openapi.json"),
    ] {
        assert!(
            ops.contains(&(method.to_owned(), path.to_owned())),
            "{method} {path} missing"
        );
    }
    // Every operation has responses with schemas for its errors, and every documented
    // route is served (the router's own fallbacks answer "route not found" or 405).
    for (method, path) in &ops {
        let op = &doc["paths"][path][method];
        assert!(
            op["responses"].as_object().is_some_and(|r| !r.is_empty()),
            "{method} {path}"
        );
        let concrete = path
            .replace("{id}", "00000000-0000-0000-0000-000000000000")
            .replace("{channel}", "slack")
            .replace("{connection_id}", "00000000-0000-0000-0000-000000000000");
        let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let r = pod
            .client
            .request(m, pod.url(&concrete))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_ne!(status, 405, "{method} {path} is documented but not routed");
        assert_ne!(
            body["message"], "route not found",
            "{method} {path} is documented but not routed"
        );
    }
    // Nothing is registered outside the documented routers.
    let http = concat!(env!("CARGO_MANIFEST_DIR"), "/src/http");
    for entry in std::fs::read_dir(http).unwrap() {
        let path = entry.unwrap().path();
        let source = std::fs::read_to_string(&path)
            .unwrap()
            .replace("OpenApiRouter::new()", "");
        assert!(
            !source.contains(".route(") && !source.contains("Router::new()"),
            "{} registers routes outside `routes!`, so they would be undocumented",
            path.display()
        );
    }
}
