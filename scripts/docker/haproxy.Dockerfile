# Stand-in for the official haproxy image, built by scripts/docker-base-images.sh when no
# registry answers, from Debian's HAProxy (bookworm has 2.6; our config needs nothing
# newer). It keeps the contract our compose files use: the configuration at
# /usr/local/etc/haproxy/haproxy.cfg, `haproxy -W -db` in the foreground as user haproxy,
# and SIGUSR1 (soft stop) as the stop signal.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /usr/local/etc/haproxy /var/lib/haproxy \
    && chown haproxy:haproxy /var/lib/haproxy
COPY haproxy-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
STOPSIGNAL SIGUSR1
USER haproxy
WORKDIR /var/lib/haproxy
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
LABEL org.switchboard.stand-in="haproxy"
