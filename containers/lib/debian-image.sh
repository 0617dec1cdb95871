# shellcheck shell=bash disable=SC2154  # the variables are set by the engine's build.sh
# Shared part of the containers/<engine>/build.sh scripts: build a server image from Debian's
# own packages, for hosts that cannot pull the official image. Sourced, not run. The engine's
# script sets these, defines the hook if it needs one, then calls `debian_image_build "$@"`:
#
#   here             the engine's directory; its entrypoint.sh becomes $entrypoint
#   repo             image repository, e.g. tunelab/mariadb (engine name = its last part);
#                    "${TUNELAB_IMAGE_PREFIX:-tunelab}/<engine>", the name the lab looks for
#   packages         array of Debian packages to install (no recommends)
#   version_package  the package whose version names the tag and the label
#   cmd, port        the image's CMD (one word) and EXPOSEd port
#   env              optional array of NAME=value for the image (default: a plain PATH)
#   entrypoint       optional, default /usr/local/bin/tunelab-entrypoint
#   image_files      optional function, called with the rootfs: copy config files in, remove
#                    what the packages created at install time (data directories ...)
#   installed        optional function, called with the rootfs once the packages are in and
#                    before their version is read: may set version_package and env from
#                    what the release installed (its own major version)
#   restart_signal   optional: the signal on which the entrypoint restarts the server in the
#                    running container (label org.tunelab.restart-signal)
#
# Tags: <repo>:<suite>-<upstream version> and the alias <repo>:local (the default suite) or
# <repo>:local-<suite> (another Debian release: another version of the engine, beside it).
# Idempotent unless --force, or unless the image was built from other files (label
# org.tunelab.files).
# The apt mirror is read from the host's sources at run time (or --mirror/TUNELAB_APT_MIRROR);
# a release the host does not list is read from the mirrors of the host's own release.
# --check only says whether the mirror serves the suite (its dists/<suite>/Release): exit 0,
# else one line and exit 1; no root, no Docker.
# debootstrap and the chroot's commands see only $clean_env (and the host's apt proxy): the
# caller's TMPDIR, locale and the like name what the chroot does not have.

default_suite=bookworm  # tunelab.engines.images.DEFAULT_SUITE is the same
suite=$default_suite
mirror=${TUNELAB_APT_MIRROR:-}
force=0
check=0
entrypoint=/usr/local/bin/tunelab-entrypoint
clean_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
           LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
# A repository name as docker takes it: lowercase components joined by "/"
# (tunelab.engines.images.REPOSITORY is the same).
component='[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*'
name_re="^$component(/$component)*\$"

debian_image_build() {
    engine=${repo##*/}
    if ! [[ $repo =~ $name_re ]]; then
        echo "build.sh: TUNELAB_IMAGE_PREFIX '${TUNELAB_IMAGE_PREFIX:-}' makes the" \
            "repository '$repo'; allowed: lowercase letters and digits, '.', '_' or '-'" \
            "between them, parts joined by '/'" >&2
        exit 2
    fi
    [ -n "${env+x}" ] || env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
    parse_args "$@"
    if [ "$check" = 1 ]; then
        check_mirror
        exit 0
    fi
    alias=local
    [ "$suite" = "$default_suite" ] || alias=local-$suite
    files=$(files_hash)
    if [ "$force" = 0 ] && docker image inspect "$repo:$alias" >/dev/null 2>&1; then
        built=$(docker image inspect -f '{{index .Config.Labels "org.tunelab.files"}}' "$repo:$alias")
        if [ "$built" = "$files" ]; then
            echo "image $repo:$alias exists ($(docker image inspect -f '{{join .RepoTags " "}}' "$repo:$alias")); use --force to rebuild"
            exit 0
        fi
        echo "image $repo:$alias was built from other files than $here's: building it again"
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "build.sh: must run as root (debootstrap and chroot need it)" >&2
        exit 1
    fi
    start=$(date +%s)
    make_rootfs
    install_packages "${packages[@]}"
    install -m 0755 "$here/entrypoint.sh" "$rootfs$entrypoint"
    install -D -m 0644 "$here/../lib/supervise.sh" "$rootfs/usr/local/lib/tunelab/supervise.sh"
    if declare -F image_files >/dev/null; then image_files "$rootfs"; fi
    slim_rootfs
    import_image
}

# What the image is built from, hashed (tunelab.images.files_hash computes the same): each
# file of the engine's directory but its README and host-packages, in C order, then this
# library and the entrypoints' supervise.sh, each as its name, a NUL and its bytes. The
# image carries it as a label, so an image built from older files (another entrypoint) is
# built again.
files_hash() {
    local f
    {
        for f in $(cd "$here" && LC_ALL=C ls); do
            case "$f" in README.md|host-packages) continue ;; esac
            [ -f "$here/$f" ] || continue
            printf '%s\0' "$f"; cat "$here/$f"
        done
        for f in debian-image.sh supervise.sh; do
            printf '%s\0' "lib/$f"; cat "$here/../lib/$f"
        done
    } | sha256sum | cut -c1-16
}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --force) force=1 ;;
            --check) check=1 ;;
            --suite) suite=$2; shift ;;
            --suite=*) suite=${1#*=} ;;
            --mirror) mirror=$2; shift ;;
            --mirror=*) mirror=${1#*=} ;;
            -h|--help) usage; exit 0 ;;
            *) echo "build.sh: unknown argument '$1' (allowed: --force, --check, --suite S, --mirror URI)" >&2
               exit 2 ;;
        esac
        shift
    done
    if ! [[ $suite =~ ^[a-z][a-z0-9-]*$ ]]; then
        echo "build.sh: --suite '$suite' is not a Debian release name (allowed: lowercase" \
            "letters, digits and '-', e.g. bookworm)" >&2
        exit 2
    fi
}

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

# The "URI SUITE" entries the image's apt uses: the host's for $suite and its -updates and
# -security suites; for a release the host does not list, those of the host's own release
# (the first suite it lists without a '-') with the release's name replaced: the same
# mirrors, another release.
suite_entries() {
    local entries base
    entries=$(host_apt_entries)
    if ! awk -v s="$suite" '$2 == s { found = 1 } END { exit !found }' <<<"$entries"; then
        base=$(awk '$2 !~ /-/ { print $2; exit }' <<<"$entries")
        [ -n "$base" ] || return 0
        entries=$(awk -v b="$base" -v s="$suite" '
            $2 == b || $2 == b "-updates" || $2 == b "-security" {
                print $1, s substr($2, length(b) + 1) }' <<<"$entries")
    fi
    awk -v s="$suite" '$2 == s || $2 == s "-updates" || $2 == s "-security"' <<<"$entries"
}

# $mirror: --mirror, TUNELAB_APT_MIRROR, else the URI of the suite's own entry.
resolve_mirror() {
    entries=$(suite_entries)
    if [ -z "$mirror" ]; then
        mirror=$(awk -v s="$suite" '$2 == s { print $1; exit }' <<<"$entries")
    fi
    if [ -z "$mirror" ]; then
        echo "build.sh: no 'deb' entry in /etc/apt/sources.list* to read suite '$suite' from; pass --mirror URI" >&2
        exit 1
    fi
}

# Whether the mirror serves $suite: its Release file, fetched through the host's apt proxy.
check_mirror() {
    local url
    resolve_mirror
    host_proxy
    url=${mirror%/}/dists/$suite/Release
    if command -v curl >/dev/null; then
        "${clean_env[@]}" curl -fsS --max-time 30 -o /dev/null "$url" 2>/dev/null && return 0
    else
        "${clean_env[@]}" wget -q -T 30 -O /dev/null "$url" && return 0
    fi
    echo "build.sh: the apt mirror does not serve Debian '$suite' (no dists/$suite/Release)" >&2
    exit 1
}

# Debootstrap a minbase rootfs into $work/rootfs (removed on exit) with /proc mounted.
make_rootfs() {
    local entries
    resolve_mirror
    if ! command -v debootstrap >/dev/null; then
        echo "installing debootstrap on the host"
        apt-get install -y debootstrap >/dev/null
    fi

    host_proxy

    work=$(mktemp -d "/var/tmp/tunelab-$engine-build.XXXXXX")
    rootfs=$work/rootfs
    trap cleanup EXIT

    echo "debootstrap $suite (minbase) into $rootfs"
    "${clean_env[@]}" debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" \
        >"$work/debootstrap.log" 2>&1 || {
        tail -20 "$work/debootstrap.log" >&2
        exit 1
    }
    # The rootfs reads the suite from the mirror it was made from, its updates and security
    # suites from the host's entries (or those derived from the host's own release).
    {
        echo "deb $mirror $suite main"
        awk -v s="$suite" '$2 != s { print "deb", $1, $2, "main" }' <<<"$entries" | sort -u
    } >"$rootfs/etc/apt/sources.list"
    # No service may start inside the chroot while packages are installed.
    printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
    chmod 755 "$rootfs/usr/sbin/policy-rc.d"
    mount -t proc proc "$rootfs/proc"
}

# The proxy the host's apt uses (its Acquire::http(s)::Proxy, else the caller's
# http(s)_proxy), for debootstrap's downloads and the chroot's apt alike; never written
# into the image.
host_proxy() {
    local scheme value
    for scheme in http https; do
        value=$(apt-config dump 2>/dev/null |
            sed -n "s/^Acquire::$scheme::Proxy \"\(.*\)\";$/\1/p") || value=
        case "$value" in *://*) ;; *) value=$(printenv "${scheme}_proxy") || value= ;; esac
        [ -z "$value" ] || clean_env+=("${scheme}_proxy=$value")
    done
    [ -z "${no_proxy:-}" ] || clean_env+=("no_proxy=$no_proxy")
}

cleanup() {
    mountpoint -q "$rootfs/proc" && umount "$rootfs/proc"
    rm -rf --one-file-system "$work"  # never into what is still mounted below it
}

# Install the packages, record $pkg_version and $version (upstream part), unmount /proc.
install_packages() {
    echo "installing $*"
    "${clean_env[@]}" chroot "$rootfs" /bin/bash -c '
        set -e
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    ' install "$@" >"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; exit 1; }
    if declare -F installed >/dev/null; then installed "$rootfs"; fi

    # shellcheck disable=SC2016  # ${Version} is dpkg-query's field, not a shell variable
    pkg_version=$("${clean_env[@]}" chroot "$rootfs" dpkg-query -W -f='${Version}' "$version_package")
    umount "$rootfs/proc"
    # 1:10.11.11-0+deb12u1 -> 10.11.11, 15.14-0+deb12u1 -> 15.14
    version=${pkg_version#*:}
    version=${version%%-*}
    version=${version%%[+~]*}  # a repack's suffix (11.8.9+ds): a tag holds neither character
}

# Package caches, lists, docs, non-English locales and the chroot-only policy go.
slim_rootfs() {
    rm -f "$rootfs/usr/sbin/policy-rc.d"
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
    find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'en*' -exec rm -rf {} +
}

import_image() {
    local tag=$repo:$suite-$version size e
    local changes=(
        --change "ENTRYPOINT [\"$entrypoint\"]"
        --change "CMD [\"$cmd\"]"
        --change "EXPOSE $port"
    )
    for e in "${env[@]}"; do changes+=(--change "ENV $e"); done
    changes+=(--change "LABEL org.tunelab.engine=$engine org.tunelab.debian-suite=$suite org.tunelab.$engine-package=$pkg_version org.tunelab.files=$files")
    # The entrypoint restarts the server in place on this signal (tunelab.host.containers).
    [ -z "${restart_signal:-}" ] || changes+=(--change "LABEL org.tunelab.restart-signal=$restart_signal")

    echo "importing $tag"
    tar -C "$rootfs" --numeric-owner -c . | docker import "${changes[@]}" - "$tag" >/dev/null
    docker tag "$tag" "$repo:$alias"

    size=$(docker image inspect -f '{{.Size}}' "$tag")
    echo "built $tag (also $repo:$alias), $version_package $pkg_version, $((size / 1048576)) MiB, in $(($(date +%s) - start)) s"
}
