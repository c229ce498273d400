# Stand-in for the official redis image, built by scripts/docker-base-images.sh when no
# registry answers, from Debian's Redis (bookworm has 7.0). It keeps the contract our
# compose files use: the `redis-server …` command line (a first argument that is an option
# or a .conf file gets redis-server put in front), /data as the working directory and
# volume, the server running as `redis`, redis-cli on PATH, and protected mode off (the
# official build turns it off: the container network is the boundary).
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
COPY redis-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /data
WORKDIR /data
ENTRYPOINT ["docker-entrypoint.sh"]
EXPOSE 6379
CMD ["redis-server"]
LABEL org.switchboard.stand-in="redis"
