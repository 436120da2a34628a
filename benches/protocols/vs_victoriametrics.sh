#!/usr/bin/env bash
# Ingest rate of the collectors' protocols, Strata against VictoriaMetrics, in one run.
#
# Not run by CI. For each protocol (Prometheus remote write to /api/v1/write, Influx line
# protocol to /write) it starts a fresh Strata and a fresh VictoriaMetrics on 127.0.0.1, one
# after the other, sends each the same devops workload with `load_protocols` (encoded before
# the clock starts; 4 keep-alive connections), and prints points/s, the server's CPU seconds
# per million points, and Strata's rate over VictoriaMetrics'.
#
# Usage (from the repository root):
#
#     cargo build --release --bin strata -p strata-benches
#     HOURS=24 benches/protocols/vs_victoriametrics.sh
#
# Environment: HOURS (24), HOSTS (200), PROTOS ("rw influx"), STRATA (target/release/strata),
# LOAD (target/release/load_protocols), VM (victoria-metrics), WORK (a temporary directory),
# STRATA_PORT (24244), VM_PORT (28429).
set -euo pipefail

HOURS=${HOURS:-24}
HOSTS=${HOSTS:-200}
PROTOS=${PROTOS:-"rw influx"}
STRATA=${STRATA:-target/release/strata}
LOAD=${LOAD:-target/release/load_protocols}
VM=${VM:-victoria-metrics}
STRATA_PORT=${STRATA_PORT:-24244}
VM_PORT=${VM_PORT:-28429}
WORK=${WORK:-$(mktemp -d)}

# Starts `system` on a fresh data directory; sets PID and ADDR.
start() {
    local system=$1 dir ready
    dir=$(mktemp -d "$WORK/$system.XXXX")
    if [ "$system" = strata ]; then
        ADDR=127.0.0.1:$STRATA_PORT
        ready=/api/version
        "$STRATA" serve --data-dir "$dir" --bind 127.0.0.1 --port "$STRATA_PORT" \
            >"$dir.log" 2>&1 &
    else
        ADDR=127.0.0.1:$VM_PORT
        ready=/health
        "$VM" -storageDataPath="$dir" -retentionPeriod=10y -httpListenAddr="$ADDR" \
            >"$dir.log" 2>&1 &
    fi
    PID=$!
    for _ in $(seq 100); do
        if curl -sf -o /dev/null "http://$ADDR$ready"; then
            return
        fi
        sleep 0.1
    done
    echo "$system did not come up; see $dir.log" >&2
    exit 1
}

for proto in $PROTOS; do
    case $proto in
        rw) args=(--proto remote-write --path /api/v1/write) ;;
        influx) args=(--proto influx --path "/write?db=bench&precision=ns") ;;
        *) echo "unknown protocol $proto" >&2; exit 1 ;;
    esac
    declare -A rate cpu
    for system in strata vm; do
        start "$system"
        out=$("$LOAD" "${args[@]}" --addr "$ADDR" --pid "$PID" --hosts "$HOSTS" --hours "$HOURS")
        kill "$PID"
        wait "$PID" || true
        echo "$system $proto: $out"
        rate[$system]=$(echo "$out" | sed -n 's/.* = \([0-9]*\) points\/s.*/\1/p')
        cpu[$system]=$(echo "$out" | sed -n 's/.* = \([0-9.]*\) CPU-s per million.*/\1/p')
    done
    echo "$proto: Strata ${rate[strata]} points/s, VictoriaMetrics ${rate[vm]} points/s," \
        "ratio $(awk "BEGIN { printf \"%.2f\", ${rate[strata]} / ${rate[vm]} }")"
    echo "$proto: server CPU-s per million points: Strata ${cpu[strata]}," \
        "VictoriaMetrics ${cpu[vm]}"
done
rm -rf "$WORK"
