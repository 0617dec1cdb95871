#!/usr/bin/env bash
# Build the lab's MariaDB image from Debian's own packages, for hosts that cannot pull the
# official image: debootstrap a minimal root filesystem from the host's apt mirror, install
# mariadb-server into it, and turn it into an image with `docker import`.
#
#   containers/mariadb/build.sh [--force] [--suite bookworm] [--mirror URI]
#
# Tags: tunelab/mariadb:<suite>-<version> and tunelab/mariadb:local; with TUNELAB_IMAGE_PREFIX=P,
# P/mariadb:... instead (the name a run then looks for). Idempotent: does nothing when the
# :local image exists, built from these files, unless --force.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${TUNELAB_IMAGE_PREFIX:-tunelab}/mariadb
packages=(mariadb-server mariadb-client)
version_package=mariadb-server
cmd=mariadbd
port=3306
restart_signal=SIGUSR1

image_files() {
    install -m 0644 "$here/tunelab.cnf" "$1/etc/mysql/mariadb.conf.d/99-tunelab.cnf"
    # The entrypoint initialises a fresh datadir on the mounted volume.
    rm -rf "$1"/var/lib/mysql/*
}

# shellcheck source-path=SCRIPTDIR source=../lib/debian-image.sh
. "$here/../lib/debian-image.sh"
debian_image_build "$@"
