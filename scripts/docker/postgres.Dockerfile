# Stand-in for the official postgres image, built by scripts/docker-base-images.sh when no
# registry answers, from Debian's PostgreSQL (bookworm has 15). It keeps the parts of the
# official image's contract that our compose files use: POSTGRES_PASSWORD (required unless
# POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_USER, POSTGRES_DB, the data directory
# /var/lib/postgresql/data (PGDATA), password logins from other containers, pg_isready and
# psql on PATH, SIGINT as the stop signal. /docker-entrypoint-initdb.d is not supported.
FROM debian:bookworm-slim
RUN set -eu; \
    mkdir -p /etc/postgresql-common; \
    echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.conf; \
    apt-get update; \
    apt-get install -y --no-install-recommends postgresql-15; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /var/run/postgresql /var/lib/postgresql/data; \
    chown -R postgres:postgres /var/run/postgresql /var/lib/postgresql; \
    chmod 2777 /var/run/postgresql; \
    chmod 700 /var/lib/postgresql/data
ENV PG_MAJOR=15 \
    PGDATA=/var/lib/postgresql/data \
    PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
LABEL org.switchboard.stand-in="postgres"
