# shellcheck shell=bash
# Sourced by the lab images' entrypoints (installed as /usr/local/lib/tunelab/supervise.sh).
#   supervise STOP_SIGNAL COMMAND [ARG...]
# Runs COMMAND, the server, as this shell's child rather than in its place: SIGUSR1 stops it
# with STOP_SIGNAL and starts it again in the running container (a cold start without
# docker's stop and start, whose own work is about 0.3 s of each restart; the image's label
# org.tunelab.restart-signal tells the lab). docker stop's SIGTERM or SIGINT is passed on as
# it came, and the container ends with the server's status.
supervise() {
    local stop=$1 server="" restart=0 status
    shift
    trap 'restart=1; kill -"$stop" "$server" 2>/dev/null || true' USR1
    trap 'kill -INT "$server" 2>/dev/null || true' INT
    trap 'kill -TERM "$server" 2>/dev/null || true' TERM
    while :; do
        "$@" &
        server=$!
        while :; do
            status=0
            wait "$server" || status=$?
            # A trapped signal cuts the wait short: wait again while the server shuts down.
            kill -0 "$server" 2>/dev/null || break
        done
        [ "$restart" = 1 ] || exit "$status"
        restart=0
        echo "tunelab-entrypoint: restarting the server (SIGUSR1)"
    done
}
