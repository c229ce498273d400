# syntax=docker/dockerfile:1
# Switchboard: one image for every pod (`serve`) and for the one-shot `migrate` job.

FROM rust:1-bookworm AS builder
WORKDIR /src
# No database at build time: sqlx's checked queries, if any, use the committed .sqlx/ data.
ENV SQLX_OFFLINE=true
COPY . .
# The target dir is a cache mount (it does not outlive this step), so the binary is copied
# out of it within the same RUN.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin switchboard \
    && install -m 0755 target/release/switchboard /usr/local/bin/switchboard

FROM debian:bookworm-slim
# ca-certificates: outbound HTTPS to Slack, Twilio, Telegram, Resend and Sentry.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --no-create-home \
        --shell /usr/sbin/nologin switchboard
COPY --from=builder /usr/local/bin/switchboard /usr/local/bin/switchboard
COPY config/ /app/config/
WORKDIR /app
ENV CONFIG_DIR=/app/config \
    PORT=3000
USER switchboard
EXPOSE 3000
# No HEALTHCHECK: the image has no curl, and the orchestrator (compose, Kubernetes, the load
# balancer) probes /health and /ready itself.
ENTRYPOINT ["switchboard"]
CMD ["serve"]
