#!/usr/bin/env bash
# Build the lab's PostgreSQL 15 image from Debian's own packages, for hosts that cannot pull
# the official image: debootstrap a minimal root filesystem from the host's apt mirror,
# install postgresql-15 into it, and turn it into an image with `docker import`.
#
#   containers/postgres/build.sh [--force] [--suite bookworm] [--mirror URI]
#
# Tags: tunelab/postgres:<suite>-<version> and tunelab/postgres:local; with TUNELAB_IMAGE_PREFIX=P,
# P/postgres:... instead (the name a run then looks for). Idempotent: does nothing when the
# :local image exists, built from these files, unless --force.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${TUNELAB_IMAGE_PREFIX:-tunelab}/postgres
packages=(postgresql-15)
version_package=postgresql-15
cmd=postgres
port=5432
restart_signal=SIGUSR1
env=(
    PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    PGDATA=/var/lib/postgresql/data
)

image_files() {
    # postgresql-common creates a cluster 15/main at install; the entrypoint runs initdb on
    # the mounted data directory instead, so the image needs no pg_ctlcluster machinery.
    rm -rf "$1"/var/lib/postgresql/15 "$1"/etc/postgresql/15 "$1"/var/log/postgresql/*
    # ssl-cert's postinst made a snakeoil key (naming the build host) for that cluster; the
    # lab's server runs without SSL, and no image should carry a private key.
    find "$1"/etc/ssl/certs -lname ssl-cert-snakeoil.pem -delete
    rm -f "$1"/etc/ssl/certs/ssl-cert-snakeoil.pem "$1"/etc/ssl/private/ssl-cert-snakeoil.key
}

# shellcheck source-path=SCRIPTDIR source=../lib/debian-image.sh
. "$here/../lib/debian-image.sh"
debian_image_build "$@"
