#!/bin/bash
# Entry point of the locally built MariaDB image; it follows the official image's contract:
#   docker run -e MARIADB_ROOT_PASSWORD=... tunelab/mariadb:local [mariadbd] [--option ...]
# An empty datadir is initialised with the same options (so --innodb-page-size applies),
# root may log in over TCP with the password from the environment, and mariadbd runs as the
# entrypoint's child (SIGUSR1 restarts it in place).
set -euo pipefail

if [ "${1:-}" = mariadbd ] || [ "${1:-}" = mysqld ]; then
    shift
fi
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    exec "$@" # any other command runs as given
fi

datadir=/var/lib/mysql
mkdir -p "$datadir" /run/mysqld
chown mysql:mysql "$datadir" /run/mysqld

if [ ! -d "$datadir/mysql" ]; then
    echo "tunelab-entrypoint: initialising $datadir"
    # Options go first: mariadb-install-db wants --defaults-extra-file as its first argument.
    mariadb-install-db "$@" --user=mysql --datadir="$datadir" --skip-test-db \
        --auth-root-authentication-method=socket >/dev/null
fi

if [ -n "${MARIADB_ROOT_PASSWORD:-}" ]; then
    # The password reaches the server through an init file readable by mysql only, never a
    # command line; the server runs it on every start, so a restarted container keeps it.
    # Kept out of the binary log (a primary with a replica has one): no password in its files.
    init=/run/mysqld/tunelab-init.sql
    quoted=$(printf '%s' "$MARIADB_ROOT_PASSWORD" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g")
    (
        umask 077
        cat >"$init" <<SQL
SET SESSION sql_log_bin = 0;
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '$quoted';
ALTER USER 'root'@'%' IDENTIFIED BY '$quoted';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
SQL
    )
    chown mysql:mysql "$init"
    set -- "$@" --init-file="$init"
fi
unset MARIADB_ROOT_PASSWORD

# The server runs as this script's child: SIGUSR1 restarts it in place (supervise.sh).
# shellcheck source=../lib/supervise.sh
. /usr/local/lib/tunelab/supervise.sh
supervise TERM mariadbd "$@" --user=mysql --datadir="$datadir"
