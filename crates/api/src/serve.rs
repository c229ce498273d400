//! The listener loop: `axum::serve` with what it does not offer, a time limit for reading a
//! request's head (HTTP/1). A client that trickles its headers (one byte a second) is cut
//! off after `HTTP_HEADER_TIMEOUT_MS` instead of holding a connection, a task and, at
//! shutdown, the drain. Body and whole-request limits are middleware (`timeouts`), so they
//! apply to REST and webhooks but not to the websocket connections Socket.IO upgrades.

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets the open
/// connections finish their requests (idle ones close at once) and returns when all have.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    // Each connection holds a receiver; the loop waits for all of them to be dropped.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (stream, peer) = stream;
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let shutdown = shutdown.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            // The peer's address, for the client address of rate limits (`protection`).
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(ConnectInfo(peer));
                router.clone().oneshot(request)
            });
            let mut builder = Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout);
            // CONNECT protocol for HTTP/2 websockets, as axum::serve enables it.
            builder.http2().enable_connect_protocol();
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
            }
            drop(open);
        });
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
    Ok(())
}
