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

/// How often an HTTP/2 connection is pinged, and how long the answer may take.
const HTTP2_PING_EVERY: Duration = Duration::from_secs(20);
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Streams one HTTP/2 connection may have open at once.
const HTTP2_MAX_STREAMS: u32 = 100;

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets the open
/// connections finish their requests (idle ones close at once) and returns when all have.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    http2: bool,
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
            // Drives one connection to its end, finishing its requests on shutdown.
            macro_rules! drive {
                ($connection:expr) => {{
                    let connection = $connection;
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
                }};
            }
            let io = TokioIo::new(stream);
            if http2 {
                // Pings find dead or silent peers; a stream cap bounds one connection's
                // work. CONNECT protocol for HTTP/2 websockets, as axum::serve enables it.
                let mut builder = Builder::new(TokioExecutor::new());
                builder
                    .http1()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout);
                builder
                    .http2()
                    .timer(TokioTimer::new())
                    .keep_alive_interval(HTTP2_PING_EVERY)
                    .keep_alive_timeout(HTTP2_PING_TIMEOUT)
                    .max_concurrent_streams(HTTP2_MAX_STREAMS)
                    .enable_connect_protocol();
                drive!(builder.serve_connection_with_upgrades(io, service));
            } else {
                // HTTP/1.1 only (HTTP2_CLEARTEXT off): hyper's HTTP/2 has no header-read or
                // idle timeout, so a client could hold a cleartext HTTP/2 connection open
                // for nothing; load balancers speak HTTP/1.1 to the pods anyway. The auto
                // builder's upgrade-capable connection answers HTTP/2 whatever it is told,
                // so HTTP/1 is served by hyper's own HTTP/1 connection.
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout);
                drive!(builder.serve_connection(io, service).with_upgrades());
            }
            drop(open);
        });
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
    Ok(())
}
