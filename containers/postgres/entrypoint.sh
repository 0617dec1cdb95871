#!/bin/bash
# Entry point of the locally built PostgreSQL image; it follows the official image's contract:
#   docker run -e POSTGRES_PASSWORD=... tunelab/postgres:local [postgres] [-c name=value ...]
# An empty $PGDATA is initialised with initdb (superuser postgres, scram-sha-256 over TCP
# from anywhere), then postgres runs as user postgres with the arguments as options, as the
# entrypoint's child (SIGUSR1 restarts it in place).
set -euo pipefail

if [ "${1:-}" = postgres ]; then
    shift
fi
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    exec "$@" # any other command runs as given
fi

export PGDATA=${PGDATA:-/var/lib/postgresql/data} HOME=/var/lib/postgresql
# setpriv (util-linux) execs in place, unlike runuser: the entrypoint's child is postgres.
as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups)
# Kept as a shell variable only: neither initdb nor the server sees it in its environment.
password=${POSTGRES_PASSWORD:-}
unset POSTGRES_PASSWORD

mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 0700 "$PGDATA"
chmod 2775 /run/postgresql

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "$password" ]; then
        echo "tunelab-entrypoint: $PGDATA is empty and POSTGRES_PASSWORD is not set" >&2
        exit 1
    fi
    echo "tunelab-entrypoint: initialising $PGDATA"
    locale=C
    if locale -a 2>/dev/null | grep -qix 'c\.utf-\?8'; then locale=C.UTF-8; fi
    # The password reaches initdb through a file only postgres can read (printf is a
    # builtin: never on a command line), removed as soon as initdb is done.
    pwfile=$(umask 077; mktemp /run/postgresql/pwfile.XXXXXX)
    trap 'rm -f "$pwfile"' EXIT
    printf '%s\n' "$password" >"$pwfile"
    chown postgres:postgres "$pwfile"
    "${as_postgres[@]}" initdb --username=postgres --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale="$locale" >/dev/null
    rm -f "$pwfile"
    trap - EXIT
    # The lab connects over TCP through a published port, i.e. from the bridge network.
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
fi

# The server runs as this script's child: SIGUSR1 restarts it in place with a fast
# shutdown (SIGINT; supervise.sh). docker stop's SIGINT (fast) or SIGTERM (smart) is passed on.
# shellcheck source=../lib/supervise.sh
. /usr/local/lib/tunelab/supervise.sh
supervise INT "${as_postgres[@]}" postgres "$@"
