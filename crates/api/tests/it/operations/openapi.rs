//! `/openapi.json`: an OpenAPI 3.1 document that matches the router both ways.

use serde_json::Value;
use switchboard_domain::events::EventKind;
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
    let r = pod.get("/openapi.json").await;
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

/// `console/openapi.json` is the copy the console generates its types from
/// (`console/check.sh` checks `console/src/api-types.ts` against it); this keeps it equal to
/// what the server serves. `SB_WRITE_OPENAPI=1` rewrites it instead.
#[tokio::test]
async fn the_console_copy_of_the_document_is_current() {
    let (pod, _db) = TestPod::single().await;
    let served = pod
        .client
        .get(pod.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../console/openapi.json");
    if std::env::var("SB_WRITE_OPENAPI").is_ok_and(|v| v == "1") {
        std::fs::write(path, format!("{served}\n")).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let served: Value = serde_json::from_str(&served).unwrap();
    let committed: Value = serde_json::from_str(&committed).unwrap_or(Value::Null);
    assert!(
        served == committed,
        "console/openapi.json differs from /openapi.json: run \
         `SB_WRITE_OPENAPI=1 cargo nextest run -p switchboard-api -E 'test(/openapi/)'`, then \
         `console/check.sh --write`, and commit both"
    );
}

/// Every `$ref` names a schema the document has: a dangling one breaks the generated
/// console types (and every other client generator).
#[tokio::test]
async fn every_reference_in_the_document_resolves() {
    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => refs(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let doc = served_document().await;
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(!found.is_empty());
    for r in found {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r} is not a schema reference"));
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "{r} is referenced but not in the document's components"
        );
    }
}

/// Enum values are documented as they are spelled on the wire (all snake_case), not as the
/// Rust variants are named.
#[tokio::test]
async fn enum_values_are_the_wire_spellings() {
    fn enums<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Array(values)) = map.get("enum") {
                    out.extend(values.iter().filter_map(Value::as_str));
                }
                map.values().for_each(|v| enums(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| enums(v, out)),
            _ => {}
        }
    }
    let doc = served_document().await;
    let mut values = Vec::new();
    enums(&doc, &mut values);
    assert!(values.contains(&"awaiting_client") && values.contains(&"queued"));
    for value in values {
        assert!(
            value
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "enum value `{value}` is not a wire spelling"
        );
    }
}

/// Every operation has an id of its own (client generators key operations by it).
#[tokio::test]
async fn operation_ids_are_unique() {
    let doc = served_document().await;
    let mut seen = std::collections::HashSet::new();
    for (method, path) in operations(&doc) {
        let id = doc["paths"][&path][&method]["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
        assert!(seen.insert(id.to_owned()), "operationId {id} is used twice");
    }
}

/// Every Socket.IO event has its payload in the document, under its wire name.
#[tokio::test]
async fn the_document_describes_every_realtime_event() {
    let doc = served_document().await;
    let schemas = &doc["components"]["schemas"];
    let named: Vec<&str> = schemas["RealtimeEvent"]["oneOf"]
        .as_array()
        .expect("RealtimeEvent is a oneOf")
        .iter()
        .map(|variant| variant["properties"]["event"]["enum"][0].as_str().unwrap())
        .collect();
    let kinds: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(named, kinds);
    for variant in schemas["RealtimeEvent"]["oneOf"].as_array().unwrap() {
        for part in variant["properties"]["data"]["allOf"].as_array().unwrap() {
            let name = part["$ref"]
                .as_str()
                .unwrap()
                .trim_start_matches("#/components/schemas/");
            assert!(
                schemas[name].is_object(),
                "{name} is referenced but not in the document"
            );
        }
    }
}

/// Schemas are named by their Rust type's name, and a second type of the same name would
/// silently replace the first in the document (six `ListResponse`s once did): every
/// `ToSchema` type has a name of its own, or a `#[schema(as = …)]` that gives it one.
#[test]
fn schema_names_are_unique() {
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let crates = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        let (mut pending, mut renamed) = (false, None::<String>);
        for line in source.lines().map(str::trim) {
            if line.starts_with("use ") || line.starts_with("//") {
                continue;
            }
            if line.contains("ToSchema") && !line.starts_with("impl") {
                pending = true;
            }
            if !pending {
                continue;
            }
            if let Some(rest) = line.strip_prefix("#[schema(as = ") {
                renamed = Some(
                    rest.trim_end_matches(")]")
                        .rsplit("::")
                        .next()
                        .unwrap()
                        .to_owned(),
                );
            }
            let item = [
                "pub struct ",
                "pub enum ",
                "pub(crate) struct ",
                "pub(crate) enum ",
                "struct ",
                "enum ",
            ]
            .iter()
            .find_map(|p| line.strip_prefix(p));
            if let Some(item) = item {
                let ident: String = item
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                // `$name` in a macro body names no type.
                if !ident.is_empty() {
                    let name = renamed.take().unwrap_or(ident);
                    let place = file.display().to_string();
                    if let Some(first) = seen.insert(name.clone(), place.clone()) {
                        panic!("schema `{name}` is defined in {first} and in {place}");
                    }
                }
                (pending, renamed) = (false, None);
            }
        }
    }
}

/// `/openapi.json` as a pod serves it.
async fn served_document() -> Value {
    let (pod, _db) = TestPod::single().await;
    pod.get("/openapi.json").await.json().await.unwrap()
}
