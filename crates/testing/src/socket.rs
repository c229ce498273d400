//! A real Socket.IO client (rust_socketio, websocket transport only), for tests of the
//! realtime events in every crate.

use crate::Endpoint;
use futures::FutureExt;
use rust_socketio::asynchronous::{Client, ClientBuilder};
use rust_socketio::{Event, Payload, TransportType};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// Why a socket did not connect.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The server answered the handshake with `connect_error` and this message.
    #[error("{0}")]
    Refused(String),
    /// The client could not open the transport.
    #[error("could not connect: {0}")]
    Transport(#[from] rust_socketio::Error),
    /// Nothing answered the handshake within 10 s.
    #[error("no answer to the handshake")]
    NoAnswer,
}

/// How the server answered the handshake.
#[derive(Debug)]
enum Handshake {
    Opened,
    /// `connect_error` (or, once connected, a client error) with this message.
    Refused(String),
    /// The connection closed.
    Closed,
}

/// A connected client and everything the server sent it.
pub struct Sock {
    client: Client,
    events: UnboundedReceiver<(String, Value)>,
    /// What the client reported after the handshake: errors and the close, for failure
    /// messages.
    status: UnboundedReceiver<Handshake>,
}

/// Connects to `pod` with `auth` as the handshake payload; `Err` says why (the server's
/// `connect_error` message, or why nothing answered).
pub async fn connect(pod: &Endpoint, auth: Option<Value>) -> Result<Sock, ConnectError> {
    connect_url(&pod.base, auth).await
}

/// Connects to the server at `base` (e.g. a pod started as a process).
pub async fn connect_url(base: &str, auth: Option<Value>) -> Result<Sock, ConnectError> {
    let (events_tx, events) = unbounded_channel();
    let (status_tx, mut status) = unbounded_channel::<Handshake>();
    let opened = status_tx.clone();
    let closed = status_tx.clone();
    let mut builder = ClientBuilder::new(base.to_owned())
        .transport_type(TransportType::Websocket)
        .reconnect(false)
        .on("open", move |_, _| {
            let _ = opened.send(Handshake::Opened);
            async {}.boxed()
        })
        .on("close", move |_, _| {
            let _ = closed.send(Handshake::Closed);
            async {}.boxed()
        })
        .on("error", move |payload, _| {
            let _ = status_tx.send(Handshake::Refused(text(&payload)));
            async {}.boxed()
        })
        .on_any(move |event, payload, _| {
            if let (Event::Custom(name), Payload::Text(values)) = (event, payload) {
                let first = values.into_iter().next().unwrap_or(Value::Null);
                let _ = events_tx.send((name, first));
            }
            async {}.boxed()
        });
    if let Some(auth) = auth {
        builder = builder.auth(auth);
    }
    let client = builder.connect().await?;
    match tokio::time::timeout(Duration::from_secs(10), status.recv()).await {
        Ok(Some(Handshake::Opened)) => Ok(Sock {
            client,
            events,
            status,
        }),
        Ok(Some(Handshake::Refused(message))) => {
            let _ = client.disconnect().await;
            Err(ConnectError::Refused(message))
        }
        _ => {
            let _ = client.disconnect().await;
            Err(ConnectError::NoAnswer)
        }
    }
}

/// Connects with `auth: {token}` and panics if refused.
pub async fn connect_with(pod: &Endpoint, token: &str) -> Sock {
    connect(pod, Some(json!({ "token": token })))
        .await
        .expect("socket admitted")
}

fn text(payload: &Payload) -> String {
    match payload {
        Payload::Text(values) => values
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("{other:?}"),
    }
}

impl Sock {
    /// What the client reported since the handshake (its errors, its close), for a failure
    /// message when fewer events came than awaited.
    pub fn reported(&mut self) -> Vec<String> {
        let mut seen = Vec::new();
        while let Ok(status) = self.status.try_recv() {
            seen.push(format!("{status:?}"));
        }
        seen
    }

    /// The next event within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<(String, Value)> {
        tokio::time::timeout(wait, self.events.recv())
            .await
            .ok()
            .flatten()
    }

    /// The first event `wanted` accepts within `within` (the others are read and passed
    /// over).
    pub async fn next_matching(
        &mut self,
        within: Duration,
        mut wanted: impl FnMut(&str, &Value) -> bool,
    ) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (name, data) = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .ok()
                .flatten()?;
            if wanted(&name, &data) {
                return Some((name, data));
            }
        }
    }

    /// Collects `n` events, waiting up to 30 s in all; returns what arrived.
    pub async fn take(&mut self, n: usize) -> Vec<(String, Value)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut got = Vec::new();
        while got.len() < n {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(event)) => got.push(event),
                _ => break,
            }
        }
        got
    }

    /// Sends `event` with `data` and waits up to 5 s for the server's acknowledgement;
    /// `None` if none came.
    pub async fn ask(&self, event: &str, data: Value) -> Option<Value> {
        let (tx, mut rx) = unbounded_channel();
        self.client
            .emit_with_ack(
                event,
                Payload::Text(vec![data]),
                Duration::from_secs(5),
                move |payload, _| {
                    // rust_socketio hands an ack's arguments over as one array.
                    let first = match payload {
                        Payload::Text(values) => match values.into_iter().next() {
                            Some(Value::Array(args)) => {
                                args.into_iter().next().unwrap_or(Value::Null)
                            }
                            Some(other) => other,
                            None => Value::Null,
                        },
                        _ => Value::Null,
                    };
                    let _ = tx.send(first);
                    async {}.boxed()
                },
            )
            .await
            .ok()?;
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Closes the connection.
    pub async fn close(self) {
        let _ = self.client.disconnect().await;
    }
}
