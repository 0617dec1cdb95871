#!/usr/bin/env bash
# Build the lab's PostgreSQL image from Debian's own packages, for hosts that cannot pull the
# official image: debootstrap a minimal root filesystem from the host's apt mirror, install
# the release's own PostgreSQL into it (bookworm: postgresql-15, trixie: postgresql-17), and
# turn it into an image with `docker import`.
#
#   containers/postgres/build.sh [--force] [--suite bookworm] [--mirror URI] [--check]
#
# Tags: tunelab/postgres:<suite>-<version> and tunelab/postgres:local (bookworm) or
# tunelab/postgres:local-<suite> (another release); with TUNELAB_IMAGE_PREFIX=P,
# P/postgres:... instead (the name a run then looks for). Idempotent: does nothing when the
# alias exists, built from these files, unless --force. --check: does the mirror serve the
# suite (exit 0), else one line and exit 1.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${TUNELAB_IMAGE_PREFIX:-tunelab}/postgres
# The release's default major version (what its postgresql package depends on).
packages=(postgresql)
cmd=postgres
port=5432
restart_signal=SIGUSR1

installed() {
    # shellcheck disable=SC2016  # ${Depends} is dpkg-query's field, not a shell variable
    major=$("${clean_env[@]}" chroot "$1" dpkg-query -W -f='${Depends}' postgresql |
        grep -o 'postgresql-[0-9][0-9]*' | head -1)
    major=${major#postgresql-}
    version_package=postgresql-$major
    env=(
        PATH=/usr/lib/postgresql/$major/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        PGDATA=/var/lib/postgresql/data
    )
}

image_files() {
    # postgresql-common creates a cluster <major>/main at install; the entrypoint runs initdb
    # on the mounted data directory instead, so the image needs no pg_ctlcluster machinery.
    rm -rf "$1/var/lib/postgresql/$major" "$1/etc/postgresql/$major" "$1"/var/log/postgresql/*
    # ssl-cert's postinst made a snakeoil key (naming the build host) for that cluster; the
    # lab's server runs without SSL, and no image should carry a private key.
    find "$1"/etc/ssl/certs -lname ssl-cert-snakeoil.pem -delete
    rm -f "$1"/etc/ssl/certs/ssl-cert-snakeoil.pem "$1"/etc/ssl/private/ssl-cert-snakeoil.key
}

# shellcheck source-path=SCRIPTDIR source=../lib/debian-image.sh
. "$here/../lib/debian-image.sh"
debian_image_build "$@"
