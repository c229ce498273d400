//! Requests as a logged-in user (`pod.as_user(token)`): the request chains the tests would
//! otherwise repeat, each written once.

use crate::pod::Endpoint;
use crate::signing::secrets;
use serde_json::{Value, json};
use std::collections::HashMap;
use switchboard_domain::ChannelKind;
use uuid::Uuid;

/// Every channel's name, in the order the tests create their connections
/// ([`ChannelKind::ALL`]'s).
pub const CHANNELS: [&str; ChannelKind::ALL.len()] = {
    let mut names = [""; ChannelKind::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = ChannelKind::ALL[i].as_str();
        i += 1;
    }
    names
};

/// A pod and a bearer token.
#[derive(Clone, Copy)]
pub struct User<'a> {
    pod: &'a Endpoint,
    token: &'a str,
}

impl Endpoint {
    /// Requests to this pod as the holder of `token`.
    pub fn as_user<'a>(&'a self, token: &'a str) -> User<'a> {
        User { pod: self, token }
    }
}

/// The status and the JSON body (`null` when there is none).
pub(crate) async fn answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The status, the JSON body and the `ETag`, if any.
async fn answer_tagged(response: reqwest::Response) -> (u16, Value, Option<String>) {
    let etag = response.headers().get("etag").and_then(|v| v.to_str().ok());
    let etag = etag.map(str::to_owned);
    let (status, body) = answer(response).await;
    (status, body, etag)
}

impl User<'_> {
    /// A request with the token, to add to.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.pod
            .client
            .request(method, self.pod.url(path))
            .bearer_auth(self.token)
    }

    /// `GET {path}`.
    pub async fn get(self, path: &str) -> (u16, Value) {
        let r = self.request(reqwest::Method::GET, path).send().await;
        answer(r.unwrap_or_else(|e| panic!("GET {path}: {e}"))).await
    }

    /// `GET {path}`, with the answer's `ETag`.
    pub async fn get_tagged(self, path: &str) -> (u16, Value, Option<String>) {
        let r = self.request(reqwest::Method::GET, path).send().await;
        answer_tagged(r.unwrap_or_else(|e| panic!("GET {path}: {e}"))).await
    }

    /// `POST {path}` with a JSON body.
    pub async fn post(self, path: &str, body: Value) -> (u16, Value) {
        let r = self.request(reqwest::Method::POST, path).json(&body).send();
        answer(r.await.unwrap_or_else(|e| panic!("POST {path}: {e}"))).await
    }

    /// `PATCH {path}` with a JSON body.
    pub async fn patch(self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .request(reqwest::Method::PATCH, path)
            .json(&body)
            .send();
        answer(r.await.unwrap_or_else(|e| panic!("PATCH {path}: {e}"))).await
    }

    /// `PUT {path}` with a JSON body.
    pub async fn put(self, path: &str, body: Value) -> (u16, Value) {
        let r = self.request(reqwest::Method::PUT, path).json(&body).send();
        answer(r.await.unwrap_or_else(|e| panic!("PUT {path}: {e}"))).await
    }

    /// `POST {path}` with a JSON body and `Idempotency-Key: key`.
    pub async fn post_with_key(self, path: &str, body: Value, key: &str) -> (u16, Value) {
        let (status, body, _) = self.post_with_key_replayed(path, body, key).await;
        (status, body)
    }

    /// [`User::post_with_key`], and whether the answer says it is a replay
    /// (`Idempotent-Replayed`).
    pub async fn post_with_key_replayed(
        self,
        path: &str,
        body: Value,
        key: &str,
    ) -> (u16, Value, bool) {
        let r = self
            .request(reqwest::Method::POST, path)
            .header("Idempotency-Key", key)
            .json(&body)
            .send();
        let r = r.await.unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let replayed = r.headers().contains_key("idempotent-replayed");
        let (status, body) = answer(r).await;
        (status, body, replayed)
    }

    /// `GET {path}` asking for `accept` (`Accept`), the response as it comes: for the
    /// streamed exports, read in chunks or as text.
    pub async fn get_accepting(self, path: &str, accept: &str) -> reqwest::Response {
        let r = self
            .request(reqwest::Method::GET, path)
            .header("accept", accept);
        r.send().await.unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// `POST {path}` without a body.
    pub async fn post_empty(self, path: &str) -> (u16, Value) {
        let r = self.request(reqwest::Method::POST, path).send().await;
        answer(r.unwrap_or_else(|e| panic!("POST {path}: {e}"))).await
    }

    /// `DELETE {path}`'s status.
    pub async fn delete(self, path: &str) -> u16 {
        let r = self.request(reqwest::Method::DELETE, path).send().await;
        r.unwrap_or_else(|e| panic!("DELETE {path}: {e}"))
            .status()
            .as_u16()
    }

    /// `GET /auth/me`: the status and the error code, if any.
    pub async fn me(self) -> (u16, Value) {
        let (status, body) = self.get("/auth/me").await;
        (status, body["code"].clone())
    }

    /// Creates `org`'s connection of `channel` named after it, with the test secrets
    /// (`signing::secrets`); its id.
    pub async fn create_connection(self, org: Uuid, channel: &str) -> Uuid {
        self.create_connection_with(org, channel, channel, secrets(channel))
            .await
    }

    /// Creates a connection through the API (its secrets are encrypted like any other);
    /// its id.
    pub async fn create_connection_with(
        self,
        org: Uuid,
        channel: &str,
        name: &str,
        secrets: Value,
    ) -> Uuid {
        let body = json!({"org_id": org, "channel": channel, "name": name, "secrets": secrets});
        let (status, created) = self.post("/channel-connections", body).await;
        assert_eq!(status, 201, "create the {channel} connection: {created}");
        created["id"].as_str().expect("id").parse().expect("uuid")
    }

    /// `POST /expert-queue/{item}/{action}`.
    pub async fn act(self, item: Uuid, action: &str, body: Value) -> (u16, Value) {
        self.post(&format!("/expert-queue/{item}/{action}"), body)
            .await
    }

    /// `POST /expert-queue/{item}/{action}` with `If-Match: tag`, and the answer's `ETag`.
    pub async fn act_if_match(
        self,
        item: Uuid,
        action: &str,
        body: Value,
        tag: &str,
    ) -> (u16, Value, Option<String>) {
        let path = format!("/expert-queue/{item}/{action}");
        let request = self.request(reqwest::Method::POST, &path);
        let r = request.header("If-Match", tag).json(&body).send().await;
        answer_tagged(r.unwrap_or_else(|e| panic!("POST {path}: {e}"))).await
    }

    /// `POST /expert-queue/{item}/release` with `body` (the draft when `None`).
    pub async fn release(self, item: Uuid, body: Option<&str>) -> (u16, Value) {
        self.act(item, "release", json!({ "body": body })).await
    }

    /// Releases `item` and returns its outbox id.
    pub async fn release_ok(self, item: Uuid, body: Option<&str>) -> Uuid {
        let (status, answer) = self.release(item, body).await;
        assert_eq!(status, 200, "{answer}");
        outbox_of(&answer)
    }
}

/// The outbox id in a release's answer.
pub fn outbox_of(answer: &Value) -> Uuid {
    answer["message"]["outbox_id"]
        .as_str()
        .expect("outbox_id")
        .parse()
        .expect("uuid")
}

/// A seeded member, logged in.
pub struct Member {
    /// The org.
    pub org: Uuid,
    /// The user.
    pub id: Uuid,
    /// The login.
    pub email: String,
    /// The password.
    pub password: String,
    /// A bearer token.
    pub token: String,
}

/// An org with an admin and one connection per channel.
pub struct Org {
    /// The org.
    pub id: Uuid,
    /// The admin's token.
    pub token: String,
    /// The connection of each channel.
    pub conns: HashMap<&'static str, Uuid>,
}

impl Org {
    /// A new org with an admin (logged in through `via`) and one connection per channel,
    /// made through `via`'s API.
    pub async fn create(db: &crate::TestDb, via: &Endpoint) -> Org {
        let (id, email, password) =
            crate::seed_member(db, None, switchboard_domain::Role::Admin).await;
        let token = via.login(&email, &password).await;
        let mut conns = HashMap::new();
        for channel in CHANNELS {
            let conn = via.as_user(&token).create_connection(id, channel).await;
            conns.insert(channel, conn);
        }
        Org { id, token, conns }
    }

    /// The webhook path of the org's `channel` connection.
    pub fn webhook(&self, channel: &str) -> String {
        format!("/webhooks/{channel}/{}", self.conns[channel])
    }
}
