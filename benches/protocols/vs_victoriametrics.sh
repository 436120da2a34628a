#!/usr/bin/env bash
# Ingest rate of the collectors' protocols, Strata against VictoriaMetrics, in one run.
#
# Not run by CI. For each protocol (Prometheus remote write to /api/v1/write, Influx line
# protocol to /write) it starts a fresh Strata and a fresh VictoriaMetrics on 127.0.0.1, one
# after the other, sends each the same devops workload with `load_protocols` (encoded before
# the clock starts; 4 keep-alive connections), and prints points/s, the server's CPU seconds
# per million points, and Strata's rate over VictoriaMetrics'. With RUNS above 1 it repeats each
# pair, the two in turn first, and prints every pair's ratio and their median: on a shared
# machine one pair's ratio swings by a fifth either way.
#
# Usage (from the repository root):
#
#     cargo build --release --bin strata -p strata-benches
#     HOURS=24 benches/protocols/vs_victoriametrics.sh
#
# Environment: HOURS (24), HOSTS (200), PROTOS ("rw influx"), RUNS (1), STRATA (target/release/strata),
# LOAD (target/release/load_protocols), VM (victoria-metrics), WORK (a temporary directory),
# STRATA_PORT (24244), VM_PORT (28429).
set -euo pipefail

HOURS=${HOURS:-24}
HOSTS=${HOSTS:-200}
PROTOS=${PROTOS:-"rw influx"}
RUNS=${RUNS:-1}
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
    ratios=()
    for run in $(seq "$RUNS"); do
        declare -A rate cpu
        # The two in turn first, so that a machine slowing down during a run favours neither.
        if [ $((run % 2)) -eq 1 ]; then order="strata vm"; else order="vm strata"; fi
        for system in $order; do
            start "$system"
            out=$("$LOAD" "${args[@]}" --addr "$ADDR" --pid "$PID" --hosts "$HOSTS" --hours "$HOURS")
            kill "$PID"
            wait "$PID" || true
            echo "$system $proto: $out"
            rate[$system]=$(echo "$out" | sed -n 's/.* = \([0-9]*\) points\/s.*/\1/p')
            cpu[$system]=$(echo "$out" | sed -n 's/^server CPU.* = \([0-9.]*\) CPU-s per million.*/\1/p')
        done
        ratio=$(awk "BEGIN { printf \"%.2f\", ${rate[strata]} / ${rate[vm]} }")
        ratios+=("$ratio")
        echo "$proto: Strata ${rate[strata]} points/s, VictoriaMetrics ${rate[vm]} points/s," \
            "ratio $ratio"
        echo "$proto: server CPU-s per million points: Strata ${cpu[strata]}," \
            "VictoriaMetrics ${cpu[vm]}"
        unset rate cpu
    done
    if [ "$RUNS" -gt 1 ]; then
        median=$(printf '%s\n' "${ratios[@]}" | sort -n |
            awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f", m }')
        echo "$proto: ratios ${ratios[*]}, median $median over $RUNS pairs"
    fi
done
rm -rf "$WORK"
