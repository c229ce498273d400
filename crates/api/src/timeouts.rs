//! Time limits of REST and webhook requests (the listener limits reading the head, see
//! `serve`): the whole body must have arrived within `HTTP_BODY_TIMEOUT_MS` of the request's
//! start, and the answer must be ready within `HTTP_REQUEST_TIMEOUT_MS`; otherwise 408. A
//! chunked body that never ends, or trickles, cannot hold a task, a connection or the drain.
//! The layer sits inside Socket.IO's, so websocket connections are not limited.

use crate::error::ApiError;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use switchboard_config::Config;
use tokio::time::{Instant, Sleep};

/// The two limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From the request's start to the body's end.
    pub body: Duration,
    /// From the request's start to the response.
    pub request: Duration,
}

impl Limits {
    /// The limits `config` sets.
    pub fn new(config: &Config) -> Self {
        Self {
            body: config.http.body_timeout,
            request: config.http.request_timeout,
        }
    }
}

/// The middleware (`axum::middleware::from_fn_with_state`).
pub async fn limit(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    let expired = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + limits.body;
    let request = request.map(|body| {
        Body::new(DeadlineBody {
            inner: body,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            expired: expired.clone(),
        })
    });
    match tokio::time::timeout(limits.request, next.run(request)).await {
        // The handler saw a body error; say what it was.
        Ok(_) if expired.load(Ordering::Relaxed) => {
            timeout("the request body was not received in time")
        }
        Ok(response) => response,
        Err(_) => timeout("the request was not answered in time"),
    }
}

fn timeout(message: &'static str) -> Response {
    metrics::counter!("http_timeouts_total").increment(1);
    ApiError::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", message).into_response()
}

/// The body expired before it ended.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not received in time")]
struct BodyExpired;

/// A request body that fails once its deadline passes.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    expired: Arc<AtomicBool>,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.expired.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new(BodyExpired))));
        }
        Pin::new(&mut this.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
