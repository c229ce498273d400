# Stand-in for the official rust:1-bookworm, built by scripts/docker-base-images.sh when no
# registry answers: Debian's compilers for the crates that build C (ring, mimalloc) and this
# machine's own Rust toolchain, copied in (nothing is downloaded). Same layout and
# environment as the official image: RUSTUP_HOME, CARGO_HOME, cargo and rustc on PATH.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev make \
        pkg-config git curl \
    && rm -rf /var/lib/apt/lists/*
ENV RUSTUP_HOME=/usr/local/rustup \
    CARGO_HOME=/usr/local/cargo \
    PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY toolchain/ /usr/local/rustup/toolchains/local/
# The certificate authorities this machine adds to Debian's (for instance an egress proxy
# that re-signs TLS): cargo in a build container reaches crates.io the way the host does.
COPY extra-ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
RUN mkdir -p /usr/local/cargo/bin \
    && for tool in cargo rustc rustdoc; do \
        ln -s /usr/local/rustup/toolchains/local/bin/$tool /usr/local/cargo/bin/$tool; \
    done \
    && chmod -R a+w /usr/local/cargo \
    && cargo --version && rustc --version
LABEL org.switchboard.stand-in="rust:1-bookworm"
