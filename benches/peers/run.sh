#!/usr/bin/env bash
# The peer benchmark: Strata and VictoriaMetrics (Debian's package) on the same devops data, in
# one run. See README.md in this folder.
#
#   benches/peers/run.sh                                # 4,000 series, 24 h at 10 s
#   HOSTS=5000 HOURS=1 benches/peers/run.sh             # 100,000 series
#   HOSTS=50000 HOURS=1 INTERVAL=100 benches/peers/run.sh   # 1,000,000 series
#   STRATA_AUTH=1 benches/peers/run.sh                  # Strata with --auth-file
#   SYSTEMS="strata strata-auth vm" benches/peers/run.sh    # both, in one run
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
HOSTS="${HOSTS:-200}"; HOURS="${HOURS:-24}"; INTERVAL="${INTERVAL:-10}"; SEED="${SEED:-42}"
SPLIT="${SPLIT:-4}"; REPS="${REPS:-15}"; SYSTEMS="${SYSTEMS:-strata vm}"
if [ "${STRATA_AUTH:-0}" = 1 ]; then SYSTEMS="$(echo " $SYSTEMS " | sed 's/ strata / strata-auth /')"; fi
WORK="${WORK:-${TMPDIR:-/tmp}/strata-peers}"
mkdir -p "$WORK"

if [[ " $SYSTEMS " == *" vm "* ]] && ! command -v victoria-metrics >/dev/null; then
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  # Keep the package's service from starting: it would listen on every interface.
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends victoria-metrics
  if [ "$made_policy" = 1 ]; then as_root rm -f /usr/sbin/policy-rc.d; fi
fi

(cd "$root" && cargo build --release -q --bin strata && cargo build --release -q -p strata-benches --bin devops_gen)
target="${CARGO_TARGET_DIR:-$root/target}"
name="devops-h${HOSTS}-${HOURS}h-i${INTERVAL}-s${SEED}-c${SPLIT}"
if [ ! -s "$WORK/$name.lines" ]; then
  "$target/release/devops_gen" --hosts "$HOSTS" --hours "$HOURS" --interval "$INTERVAL" \
    --seed "$SEED" --split "$SPLIT" --out "$WORK/$name.telnet" | sed -n 's/^lines=//p' > "$WORK/$name.lines.tmp"
  mv "$WORK/$name.lines.tmp" "$WORK/$name.lines"
fi
python3 "$root/benches/peers/peers.py" --strata "$target/release/strata" --data "$WORK/$name.telnet" \
  --split "$SPLIT" --expected "$(cat "$WORK/$name.lines")" --hosts "$HOSTS" --hours "$HOURS" \
  --interval "$INTERVAL" --systems "$SYSTEMS" --reps "$REPS" --work "$WORK" --out "$WORK/$name.json"
