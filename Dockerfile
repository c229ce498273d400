# Switchboard: one image for every pod (`serve`), the one-shot `migrate` job and the `admin`
# commands. Plain Dockerfile syntax (no BuildKit-only features, no `# syntax=` line that would
# pull a frontend image), so the classic builder, BuildKit, Compose v2 and Compose 1.29 all
# build it, with or without a registry mirror for frontends.

# --- 1. the workspace's skeleton: manifests and empty crate roots ---------------------------
# Its output changes only when a Cargo.toml or Cargo.lock does, so the dependency layer below
# stays cached across code changes (the same idea as cargo-chef, without a tool to fetch).
FROM debian:bookworm-slim AS skeleton
WORKDIR /src
COPY . .
# Each crate gets stubs for the roots it really has and for every target its manifest names
# by path (bins, tests): cargo must find all of them to load the workspace.
RUN set -eu; mkdir /skeleton; \
    find . -path ./target -prune -o \( -name Cargo.toml -o -name Cargo.lock \) -print \
        | xargs cp --parents -t /skeleton; \
    for manifest in crates/*/Cargo.toml; do \
        crate="${manifest%/Cargo.toml}"; \
        targets="$(sed -n 's/^path *= *"\(.*\)"/\1/p' "$manifest")"; \
        for root in src/lib.rs src/main.rs $targets; do \
            [ -f "$crate/$root" ] || continue; \
            mkdir -p "/skeleton/$crate/$(dirname "$root")"; \
            case "$root" in \
                src/lib.rs) echo '//! Stub: the skeleton builds only the dependencies.' ;; \
                *) echo 'fn main() {}' ;; \
            esac > "/skeleton/$crate/$root"; \
        done; \
        [ ! -f "$crate/build.rs" ] || cp "$crate/build.rs" "/skeleton/$crate/build.rs"; \
    done; \
    # Patched dependencies (Cargo.toml's [patch.crates-io]) are dependencies: whole.
    mkdir -p /skeleton/vendor && cp -r vendor/. /skeleton/vendor/

# --- 2. build: dependencies first (cached), then the workspace's own crates -------------------
FROM rust:1-bookworm AS builder
WORKDIR /src
# No database at build time: sqlx's checked queries, if any, use the committed .sqlx/ data.
# No debug info in the image (backtraces keep function names from the symbol table); only
# the one binary, in release mode.
ENV SQLX_OFFLINE=true \
    CARGO_TERM_COLOR=never \
    CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_STRIP=debuginfo
COPY --from=skeleton /skeleton/ ./
RUN cargo build --release --locked --bin switchboard
COPY . .
# COPY keeps the context's modification times, which may be older than the stub builds
# above: touch the sources so cargo rebuilds every workspace crate from its real code.
RUN find crates -name '*.rs' -exec touch {} + \
    && cargo build --release --locked --bin switchboard \
    && install -m 0755 target/release/switchboard /usr/local/bin/switchboard

# --- 3. runtime ---------------------------------------------------------------------------
FROM debian:bookworm-slim
# The binary needs only glibc and libgcc_s (both in the base) and, for outbound HTTPS
# (Slack, Twilio, Telegram, Resend, Sentry), the CA bundle: copied from the builder rather
# than installed, so this stage needs no package download and no openssl.
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin switchboard
COPY --from=builder /usr/local/bin/switchboard /usr/local/bin/switchboard
COPY config/ /app/config/
WORKDIR /app
# Production unless told otherwise: the pod then refuses to start without real secrets, a
# Sentry DSN and an https PUBLIC_BASE_URL (docs/OPERATIONS.md, start-up invariants).
ENV APP_ENV=production \
    CONFIG_DIR=/app/config \
    PORT=3000 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# Numeric, so orchestrators can check runAsNonRoot without reading /etc/passwd.
USER 10001:10001
EXPOSE 3000
# SIGTERM starts the drain (AA8): /ready turns 503, then in-flight work finishes. Give the
# container DRAIN_DELAY_MS + SHUTDOWN_BUDGET_SECS to stop (compose: stop_grace_period).
STOPSIGNAL SIGTERM
# No HEALTHCHECK: the image has no curl, and the orchestrator (compose, Kubernetes, the load
# balancer) probes /health and /ready itself.
ENTRYPOINT ["switchboard"]
CMD ["serve"]
