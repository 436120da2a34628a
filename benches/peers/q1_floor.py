#!/usr/bin/env python3
"""The client's floor under a small query: VictoriaMetrics, Strata, and `fixed_answer` serving
Strata's own answer bytes, timed by the peer harness' own HTTP client and JSON decode.

Not run by CI. With VictoriaMetrics and Strata already serving the same data set, and
`fixed_answer --body <Strata's answer to the query> --port 4545` started:

    python3 benches/peers/q1_floor.py --shared ../shared --query Q1 \
        --start 1704067200 --hours 1 --hosts 5000

`floor ÷ vm` is the lowest ratio any server that answers in OpenTSDB's format can reach on this
client; `strata - floor` is the time Strata's own work adds. Rounds alternate between the three
so that the machine's drift falls on all of them.
"""
import argparse
import json
import statistics
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--shared", required=True, help="the folder holding bench/queries.py and bench/bench.py")
p.add_argument("--query", default="Q1")
p.add_argument("--start", type=int, default=1704067200)
p.add_argument("--hours", type=float, default=1)
p.add_argument("--hosts", type=int, default=5000)
p.add_argument("--vm", default="127.0.0.1:28428")
p.add_argument("--strata", default="127.0.0.1:4242")
p.add_argument("--floor", default="127.0.0.1:4545")
p.add_argument("--rounds", type=int, default=8)
p.add_argument("--reps", type=int, default=25)
a = p.parse_args()
sys.path.insert(0, a.shared + "/bench")
import bench  # noqa: E402
import queries  # noqa: E402

q = queries.build(a.start, a.hours, hosts=a.hosts)[a.query]
vm, strata, floor = bench.Http(a.vm), bench.Http(a.strata), bench.Http(a.floor)


def run_vm():
    path, params = q["vm"]
    _, data = vm.get(path, dict(params, nocache=1))
    return bench.shape_prom(data)


def run_otsdb(h):
    path, body = q["opentsdb"]
    _, data = h.post_json(path, body)
    res = json.loads(data)
    return len(res), sum(len(r.get("dps", {})) for r in res)


systems = {"vm": run_vm, "strata": lambda: run_otsdb(strata), "floor": lambda: run_otsdb(floor)}
print("shapes", {k: f() for k, f in systems.items()})
lat = {k: [] for k in systems}
for _ in range(a.rounds):
    for k, f in systems.items():
        for _ in range(3):
            f()
        for _ in range(a.reps):
            t = time.perf_counter()
            f()
            lat[k].append((time.perf_counter() - t) * 1e3)
med = {k: statistics.median(v) for k, v in lat.items()}
print("median ms", {k: round(v, 3) for k, v in med.items()})
print(f"strata/vm {med['strata'] / med['vm']:.3f}  floor/vm {med['floor'] / med['vm']:.3f}  "
      f"strata-floor {med['strata'] - med['floor']:.3f} ms")
