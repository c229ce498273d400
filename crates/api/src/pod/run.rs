//! Binding, serving and the graceful shutdown of a pod (AA8).

use super::{App, StartError};
use crate::state::AppState;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A pod whose listeners are bound: a port conflict has already failed the start, before any
/// worker took a job.
pub struct Bound {
    state: AppState,
    listener: TcpListener,
    addr: SocketAddr,
    metrics: Option<(TcpListener, SocketAddr)>,
}

impl App {
    /// Binds, starts the background work and serves: [`App::bind`], [`Bound::spawn_background`]
    /// and [`Bound::serve`] in one call.
    pub async fn start(self) -> Result<Server, StartError> {
        let bound = self.bind().await?;
        bound.spawn_background();
        Ok(bound.serve())
    }

    /// Binds `BIND_ADDR:PORT`, and `METRICS_ADDR` when set (kept off the public port).
    pub async fn bind(self) -> Result<Bound, StartError> {
        let http = &self.state.config.http;
        let addr = SocketAddr::new(http.bind_addr, http.port);
        let (listener, local) = listen(addr).await?;
        let metrics = match self.state.config.telemetry.metrics_addr {
            Some(addr) => Some(listen(addr).await?),
            None => None,
        };
        Ok(Bound {
            state: self.state,
            listener,
            addr: local,
            metrics,
        })
    }
}

async fn listen(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), StartError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr, source })?;
    Ok((listener, local))
}

impl Bound {
    /// Starts the workers, relays, sweepers and the scheduler (see [`super::background`]).
    pub fn spawn_background(&self) {
        super::background::spawn(&self.state);
    }

    /// Serves the API (REST, webhooks, Socket.IO, the console) and `/metrics`, and arms the
    /// drain: once requested, readiness is 503 for `DRAIN_DELAY` before the listener closes.
    pub fn serve(self) -> Server {
        let Bound {
            state,
            listener,
            addr,
            metrics,
        } = self;
        let lifecycle = state.lifecycle.clone();
        let router = crate::http::router(state.clone());
        let header_timeout = state.config.http.header_timeout;
        let http2_cleartext = state.config.http.http2_cleartext;

        // Drain: readiness is already 503; wait so the load balancer notices, then stop.
        let drain_delay = state.config.lifecycle.drain_delay;
        let drain = lifecycle.clone();
        let token = lifecycle.shutdown_token();
        let stopped = token.clone();
        lifecycle.tasks().spawn(async move {
            drain.drain_requested().await;
            tracing::info!(delay_ms = drain_delay.as_millis() as u64, "draining");
            // A pod stopped outright (not drained) does not wait for the delay.
            tokio::select! {
                () = tokio::time::sleep(drain_delay) => drain.stop(),
                () = stopped.cancelled() => {}
            }
        });

        let metrics_addr = metrics.map(|(listener, bound)| {
            let router =
                axum::Router::new().route("/metrics", axum::routing::get(crate::metrics::render));
            let token = token.clone();
            lifecycle.tasks().spawn(async move {
                if let Err(e) =
                    crate::serve::serve(listener, router, header_timeout, false, token).await
                {
                    tracing::error!(error = %e, "metrics listener failed");
                }
            });
            tracing::info!(addr = %bound, "metrics listening");
            bound
        });
        let http = tokio::spawn(crate::serve::serve(
            listener,
            router,
            header_timeout,
            http2_cleartext,
            token,
        ));
        tracing::info!(%addr, "listening");
        Server {
            addr,
            metrics_addr,
            state,
            http,
        }
    }
}

/// A running pod.
pub struct Server {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    state: AppState,
    http: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where `/metrics` is served when `METRICS_ADDR` is set (useful with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The pod's state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Starts a graceful shutdown, as SIGTERM does.
    pub fn begin_shutdown(&self) {
        self.state.lifecycle.begin_drain();
    }

    /// Waits for SIGTERM or SIGINT, then shuts down gracefully.
    pub async fn run_until_signal(self) -> Result<(), std::io::Error> {
        let lifecycle = self.state.lifecycle.clone();
        tokio::select! {
            () = shutdown_signal() => {
                tracing::info!("shutdown signal received");
                lifecycle.begin_drain();
            }
            () = lifecycle.drain_requested() => {}
        }
        self.wait().await
    }

    /// Waits until the pod has stopped: the listener is closed, in-flight requests and
    /// tracked tasks finished (or the budget ran out), pools closed.
    pub async fn wait(self) -> Result<(), std::io::Error> {
        let lifecycle = self.state.lifecycle.clone();
        lifecycle.drain_requested().await;
        let budget =
            self.state.config.lifecycle.drain_delay + self.state.config.lifecycle.shutdown_budget;
        let tasks = lifecycle.tasks().clone();
        tasks.close();
        let finished = tokio::time::timeout(budget, async {
            let served = self.http.await;
            tasks.wait().await;
            served
        })
        .await;
        let result = match finished {
            Ok(Ok(served)) => served,
            Ok(Err(join)) => Err(std::io::Error::other(join)),
            Err(_) => {
                tracing::warn!(budget_s = budget.as_secs(), "shutdown budget exhausted");
                Ok(())
            }
        };
        self.state.db.close().await;
        tracing::info!("stopped");
        result
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
