#!/usr/bin/env bash
# Build the lab's MariaDB image from Debian's own packages, for hosts that cannot pull the
# official image: debootstrap a minimal root filesystem from the host's apt mirror, install
# mariadb-server into it, and turn it into an image with `docker import`.
#
#   containers/mariadb/build.sh [--force] [--suite bookworm] [--mirror URI]
#
# Tags: tunelab/mariadb:<suite>-<mariadb version> and tunelab/mariadb:local.
# Idempotent: does nothing when tunelab/mariadb:local exists, unless --force.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=tunelab/mariadb
suite=bookworm
mirror=${TUNELAB_APT_MIRROR:-}
force=0

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1 ;;
        --suite) suite=$2; shift ;;
        --suite=*) suite=${1#*=} ;;
        --mirror) mirror=$2; shift ;;
        --mirror=*) mirror=${1#*=} ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build.sh: unknown argument '$1' (allowed: --force, --suite S, --mirror URI)" >&2
           exit 2 ;;
    esac
    shift
done

if [ "$force" = 0 ] && docker image inspect "$repo:local" >/dev/null 2>&1; then
    echo "image $repo:local exists ($(docker image inspect -f '{{join .RepoTags " "}}' "$repo:local")); use --force to rebuild"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "build.sh: must run as root (debootstrap and chroot need it)" >&2
    exit 1
fi

# apt entries of the host as "URI SUITE" lines, from one-line .list files and deb822
# .sources files alike; only "deb" (binary) entries, only enabled ones.
host_apt_entries() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [opt=val ...] URI SUITE COMPONENT...
        sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 { print $2, $3 }'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && enabled !~ /^[Nn]o/)
                    for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j]
                types = ""; enabled = ""; nu = 0; ns = 0
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key)
                if (key == "types") { $1 = ""; types = $0 " " }
                else if (key == "enabled") enabled = $2
                else if (key == "uris") for (i = 2; i <= NF; i++) u[++nu] = $i
                else if (key == "suites") for (i = 2; i <= NF; i++) s[++ns] = $i
            }
            END { flush() }
        ' "$f"
    done
}

entries=$(host_apt_entries)
if [ -z "$mirror" ]; then
    mirror=$(awk -v s="$suite" '$2 == s { print $1; exit }' <<<"$entries")
fi
if [ -z "$mirror" ]; then
    echo "build.sh: no 'deb' entry for suite '$suite' in /etc/apt/sources.list*; pass --mirror URI" >&2
    exit 1
fi

if ! command -v debootstrap >/dev/null; then
    echo "installing debootstrap on the host"
    apt-get install -y debootstrap >/dev/null
fi

start=$(date +%s)
work=$(mktemp -d /var/tmp/tunelab-mariadb-build.XXXXXX)
rootfs=$work/rootfs
cleanup() {
    mountpoint -q "$rootfs/proc" && umount "$rootfs/proc"
    rm -rf "$work"
}
trap cleanup EXIT

echo "debootstrap $suite (minbase) into $rootfs"
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log" >&2
    exit 1
}

# The rootfs uses the host's entries for this suite and its updates/security suites.
awk -v s="$suite" '$2 == s || $2 == s "-updates" || $2 == s "-security" {
    print "deb", $1, $2, "main" }' <<<"$entries" | sort -u >"$rootfs/etc/apt/sources.list"
# No service may start inside the chroot while packages are installed.
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 755 "$rootfs/usr/sbin/policy-rc.d"
mount -t proc proc "$rootfs/proc"

echo "installing mariadb-server"
chroot "$rootfs" /bin/bash -c '
    set -e
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends mariadb-server mariadb-client >/dev/null
' >"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; exit 1; }

pkg_version=$(chroot "$rootfs" dpkg-query -W -f='${Version}' mariadb-server)
umount "$rootfs/proc"

# 1:10.11.11-0+deb12u1 -> 10.11.11
version=${pkg_version#*:}
version=${version%%-*}
tag="$repo:$suite-$version"

install -m 0755 "$here/entrypoint.sh" "$rootfs/usr/local/bin/tunelab-entrypoint"
install -m 0644 "$here/tunelab.cnf" "$rootfs/etc/mysql/mariadb.conf.d/99-tunelab.cnf"

# Slim the image: package caches, lists, docs, the datadir the package created (the
# entrypoint initialises a fresh one on the mounted volume), the chroot-only policy.
rm -f "$rootfs/usr/sbin/policy-rc.d"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/var/lib/mysql/*
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'en*' -exec rm -rf {} +

echo "importing $tag"
tar -C "$rootfs" --numeric-owner -c . | docker import \
    --change 'ENTRYPOINT ["/usr/local/bin/tunelab-entrypoint"]' \
    --change 'CMD ["mariadbd"]' \
    --change 'EXPOSE 3306' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "LABEL org.tunelab.engine=mariadb org.tunelab.debian-suite=$suite org.tunelab.mariadb-package=$pkg_version" \
    - "$tag" >/dev/null
docker tag "$tag" "$repo:local"

size=$(docker image inspect -f '{{.Size}}' "$tag")
echo "built $tag (also $repo:local), mariadb-server $pkg_version, $((size / 1048576)) MiB, in $(($(date +%s) - start)) s"
