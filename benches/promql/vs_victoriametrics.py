#!/usr/bin/env python3
"""PromQL answers and latency of Strata against VictoriaMetrics on the same devops data.

Not run by CI. It generates a devops data set with the peer benchmark's generator (`devops_gen`),
sends the same telnet `put` lines to a fresh VictoriaMetrics and a fresh Strata (both on
127.0.0.1), then runs the MetricsQL forms of the peer benchmark's Q1-Q5 against both
`/api/v1/query(_range)` endpoints and

  * compares the answers: the same series (label sets) and the same points, values within
    1e-9 relative, except where PromQL and MetricsQL differ by definition (listed in the
    report and in docs/promql.md);
  * checks Strata's Q3 `rate` against Prometheus' extrapolated rate computed here from the
    raw samples, since MetricsQL's `rate` is defined differently;
  * measures the median latency of each query on both (client side, HTTP keep-alive,
    VictoriaMetrics with `nocache=1`).

Usage (from the repository root, after `cargo build --release`):

    HOSTS=20 HOURS=3 python3 benches/promql/vs_victoriametrics.py

Environment: HOSTS (20), HOURS (3), DEVOPS_GEN (target/release/devops_gen), STRATA (target/release/strata),
VM (victoria-metrics), WORK (a temporary directory), RUNS (25 timed runs per query),
VM_PORT (28528), VM_TELNET (24342), STRATA_PORT (24343). Exits non-zero when an answer
differs outside the listed definitional differences.
"""
import http.client
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

HOSTS = int(os.environ.get("HOSTS", "20"))
HOURS = int(os.environ.get("HOURS", "3"))
START = 1767225600  # devops_gen's first timestamp, 2026-01-01T00:00:00Z
INTERVAL = 10
RUNS = int(os.environ.get("RUNS", "25"))
DEVOPS_GEN = os.environ.get("DEVOPS_GEN", "target/release/devops_gen")
STRATA = os.environ.get("STRATA", "target/release/strata")
VM = os.environ.get("VM", "victoria-metrics")
VM_PORT = int(os.environ.get("VM_PORT", "28528"))
VM_TELNET = int(os.environ.get("VM_TELNET", "24342"))
STRATA_PORT = int(os.environ.get("STRATA_PORT", "24343"))
REL = 1e-9


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def queries():
    """The peer benchmark's Q1-Q5 in MetricsQL, for the data window [START, END)."""
    end = START + HOURS * 3600
    h12 = max(START, end - 12 * 3600)
    h24 = max(START, end - 24 * 3600)
    host = "host-0001"
    return {
        "Q1": ("/api/v1/query", {"query": f'cpu.user{{host="{host}"}}[1h]', "time": end - 1}),
        "Q2": ("/api/v1/query_range", {"query": "sum(avg_over_time(cpu.user[1m]))",
                                       "start": h12 + 60, "end": end, "step": 60}),
        "Q3": ("/api/v1/query_range", {"query": f'rate(disk.read_bytes{{host="{host}"}}[5m])',
                                       "start": h24 + 300, "end": end, "step": 300}),
        "Q4": ("/api/v1/query_range", {"query": "avg by (dc) (avg_over_time(cpu.user[1h]))",
                                       "start": START + 3600, "end": end, "step": 3600}),
        "Q5": ("/api/v1/query", {"query": "last_over_time(cpu.user[1h])", "time": end - 1}),
    }


def extra_queries():
    """More of the supported PromQL, as range queries over the last two hours (step 60 s):
    compared like Q1-Q5, not timed."""
    end = START + HOURS * 3600
    start = max(START + 3600, end - 2 * 3600)
    forms = [
        "max by (dc) (max_over_time(cpu.user[5m]))",
        "min without (host, rack, os, service, team) (min_over_time(cpu.user[5m]))",
        "count(cpu.user > 50)",
        "sum by (dc) (sum_over_time(mem.used[3m])) / 1000",
        "count_over_time(cpu.idle{dc=~\"dc-[01]\"}[7m])",
        "topk(3, avg_over_time(cpu.user[10m]))",
        "cpu.user - cpu.system",
        "cpu.user{host!~\"host-000[1-5]\"} * 2 + 1",
        "irate(net.bytes_recv{host=\"host-0002\"}[2m])",
        "sum(irate(disk.write_bytes[1m]))",
        "last_over_time(cpu.user{host=\"host-0003\"}[1m]) >= bool 50",
        "avg(cpu.user) + on() group_left count(cpu.user)",
    ]
    return {f"X{i + 1}": ("/api/v1/query_range", {"query": q, "start": start, "end": end,
                                                   "step": 60})
            for i, q in enumerate(forms)}


# Where the two languages differ by definition (see docs/promql.md).
DEFINITIONAL = {
    "Q3": "MetricsQL's rate does not extrapolate to the window's edges and takes the sample "
          "before the window as its first point; Prometheus' extrapolates (checked against "
          "Prometheus' definition from the raw samples instead)",
}


class Http:
    def __init__(self, port):
        self.port = port
        self.c = None

    def get(self, path, params):
        url = path + "?" + urllib.parse.urlencode(params)
        for attempt in range(2):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
                self.c.request("GET", url)
                r = self.c.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.c = None
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def post(self, path, body=b""):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("POST", path, body)
        r = c.getresponse()
        return r.status, r.read()


def wait_port(port, proc, timeout=60):
    t_end = time.time() + timeout
    while time.time() < t_end:
        if proc.poll() is not None:
            raise RuntimeError(f"process on port {port} exited early")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


def send(port, path, barrier):
    with socket.create_connection(("127.0.0.1", port)) as s, open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            s.sendall(chunk)
        if barrier:
            # Strata answers `version` once every put before it is stored.
            s.sendall(b"version\n")
            buf = b""
            while b"net.opentsdb.tools" not in buf:
                d = s.recv(65536)
                if not d:
                    raise RuntimeError("strata closed the connection")
                buf += d
            if b"put:" in buf:
                raise RuntimeError(buf[:300])
        else:
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass


def result(body):
    j = json.loads(body)
    if j.get("status") != "success":
        raise RuntimeError(body[:300])
    return j["data"]


def series_map(data, drop_name=False):
    """{frozenset(labels): [(t, value)]} of a vector or matrix result."""
    out = {}
    for r in data["result"]:
        labels = dict(r["metric"])
        if drop_name:
            labels.pop("__name__", None)
        pts = r.get("values") or [r["value"]]
        out[frozenset(labels.items())] = [(float(t), float(v)) for t, v in pts]
    return out


def close(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= REL * max(abs(a), abs(b))


def compare(name, vm, st):
    """Differences between VictoriaMetrics' and Strata's answers, as text lines."""
    diffs = []
    names_differ = (
        series_map_keys(vm, False) != series_map_keys(st, False)
        and series_map_keys(vm, True) == series_map_keys(st, True)
    )
    if names_differ:
        diffs.append("label sets differ only by __name__ (see below)")
    vm_s = series_map(vm, names_differ)
    st_s = series_map(st, names_differ)
    if set(vm_s) != set(st_s):
        diffs.append(f"series differ: only VM {len(set(vm_s) - set(st_s))}, "
                     f"only Strata {len(set(st_s) - set(vm_s))}")
    worst = 0.0
    point_diffs = 0
    for k in set(vm_s) & set(st_s):
        a, b = dict(vm_s[k]), dict(st_s[k])
        if set(a) != set(b):
            diffs.append(f"{dict(k)}: timestamps differ: only VM {sorted(set(a) - set(b))[:5]}, "
                         f"only Strata {sorted(set(b) - set(a))[:5]}")
        for t in set(a) & set(b):
            if not close(a[t], b[t]):
                point_diffs += 1
                worst = max(worst, abs(a[t] - b[t]) / max(abs(a[t]), abs(b[t]), 1e-300))
    if point_diffs:
        diffs.append(f"{point_diffs} values differ by more than {REL} relative "
                     f"(worst {worst:.3g})")
    return diffs


def series_map_keys(data, drop_name):
    return set(series_map(data, drop_name))


def prometheus_rate(samples, t_ms, range_ms):
    """Prometheus' extrapolatedRate (counter, per second) over the window (t-range, t]."""
    w = [(t, v) for t, v in samples if t_ms - range_ms < t <= t_ms]
    if len(w) < 2:
        return None
    result = w[-1][1] - w[0][1]
    for (_, a), (_, b) in zip(w, w[1:]):
        if b < a:
            result += a
    to_start = (w[0][0] - (t_ms - range_ms)) / 1000
    to_end = (t_ms - w[-1][0]) / 1000
    sampled = (w[-1][0] - w[0][0]) / 1000
    avg = sampled / (len(w) - 1)
    if to_start >= avg * 1.1:
        to_start = avg / 2
    if result > 0 and w[0][1] >= 0:
        to_start = min(to_start, sampled * (w[0][1] / result))
    if to_end >= avg * 1.1:
        to_end = avg / 2
    factor = (sampled + to_start + to_end) / sampled / (range_ms / 1000)
    return result * factor


def check_q3_definition(strata, q3):
    """Strata's Q3 against Prometheus' rate computed here from the raw samples."""
    path, params = q3
    end = params["end"]
    status, body = strata.get("/api/v1/query", {
        "query": 'disk.read_bytes{host="host-0001"}[%ds]' % (end - params["start"] + 600),
        "time": end})
    raw = [(round(float(t) * 1000), float(v)) for t, v in result(body)["result"][0]["values"]]
    status, body = strata.get(path, params)
    got = dict((float(t), float(v)) for t, v in result(body)["result"][0]["values"])
    bad = 0
    for t in range(params["start"], params["end"] + 1, params["step"]):
        want = prometheus_rate(raw, t * 1000, 300_000)
        have = got.get(float(t))
        if want is None and have is None:
            continue
        if want is None or have is None or not close(want, have):
            bad += 1
    return bad, len(got)


def timed(client, path, params, runs):
    for _ in range(3):
        client.get(path, params)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        status, body = client.get(path, params)
        times.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            raise RuntimeError(body[:300])
    return statistics.median(times)


def main():
    work = os.environ.get("WORK") or tempfile.mkdtemp(prefix="promql-vm-")
    os.makedirs(work, exist_ok=True)
    prefix = os.path.join(work, f"devops-h{HOSTS}-{HOURS}h.telnet")
    data = prefix + ".0"
    if not os.path.exists(data):
        subprocess.run([DEVOPS_GEN, "--hosts", str(HOSTS), "--hours", str(HOURS), "--seed", "42",
                        "--split", "1", "--out", prefix], check=True, stdout=subprocess.DEVNULL)
    lines = sum(1 for _ in open(data, "rb"))
    log(f"data: {lines} points ({HOSTS} hosts, {HOURS} h) in {data}")
    procs = []
    try:
        vm_dir, st_dir = os.path.join(work, "vm"), os.path.join(work, "strata")
        for d in (vm_dir, st_dir):
            shutil.rmtree(d, ignore_errors=True)
        logf = open(os.path.join(work, "servers.log"), "ab")
        vm = subprocess.Popen([VM, f"-httpListenAddr=127.0.0.1:{VM_PORT}",
                               f"-opentsdbListenAddr=127.0.0.1:{VM_TELNET}",
                               f"-storageDataPath={vm_dir}", "-retentionPeriod=10y"],
                              stdout=logf, stderr=subprocess.STDOUT)
        procs.append(vm)
        st = subprocess.Popen([STRATA, "serve", "--data-dir", st_dir, "--bind", "127.0.0.1",
                               "--port", str(STRATA_PORT)],
                              stdout=logf, stderr=subprocess.STDOUT)
        procs.append(st)
        wait_port(VM_PORT, vm)
        wait_port(VM_TELNET, vm)
        wait_port(STRATA_PORT, st)
        send(VM_TELNET, data, barrier=False)
        send(STRATA_PORT, data, barrier=True)
        vmc, stc = Http(VM_PORT), Http(STRATA_PORT)
        end = START + HOURS * 3600
        count = {"query": 'sum(count_over_time({__name__!=""}[%dh]))' % (HOURS + 2),
                 "time": end, "nocache": 1}
        t_end = time.time() + 300
        while True:
            status, body = vmc.get("/api/v1/query", count)
            res = json.loads(body)["data"]["result"] if status == 200 else []
            if res and int(float(res[0]["value"][1])) >= lines:
                break
            if time.time() > t_end:
                raise RuntimeError(f"VictoriaMetrics shows {res} of {lines} points")
            time.sleep(1)
        # (Strata answers `version` once every point is stored. The count query above is not
        # PromQL: count_over_time drops `__name__`, and series of different metrics with the
        # same tags collide, which Prometheus refuses.)
        # Both at rest: VM's parts merged, Strata's rows compacted.
        vmc.get("/internal/force_flush", {})
        vmc.get("/internal/force_merge", {"partition_prefix": time.strftime("%Y_%m", time.gmtime(START))})
        stc.post("/api/admin/compact")
        time.sleep(3)

        failed = False
        print(f"# PromQL vs VictoriaMetrics: {lines} points, {HOSTS} hosts, {HOURS} h\n")
        print("| query | series | points | answers | VM ms | Strata ms | Strata/VM |")
        print("|---|---|---|---|---|---|---|")
        notes = []
        for name, (path, params) in queries().items():
            vm_params = dict(params, nocache=1)
            s1, b1 = vmc.get(path, vm_params)
            s2, b2 = stc.get(path, params)
            if s1 != 200 or s2 != 200:
                raise RuntimeError(f"{name}: VM {s1} {b1[:200]}, Strata {s2} {b2[:200]}")
            vm_data, st_data = result(b1), result(b2)
            diffs = compare(name, vm_data, st_data)
            n_series = len(st_data["result"])
            n_points = sum(len(r.get("values", [1])) for r in st_data["result"])
            if not diffs:
                verdict = "same"
            elif name in DEFINITIONAL:
                verdict = "differ by definition"
                notes.append(f"{name}: {DEFINITIONAL[name]}; " + "; ".join(diffs))
            elif diffs == ["label sets differ only by __name__ (see below)"]:
                verdict = "same values; __name__ differs"
                notes.append(f"{name}: VictoriaMetrics and Prometheus differ on which functions "
                             "keep the metric name")
            else:
                verdict = "DIFFERENT"
                failed = True
                notes.append(f"{name}: " + "; ".join(diffs))
            vm_ms = timed(vmc, path, vm_params, RUNS)
            st_ms = timed(stc, path, params, RUNS)
            print(f"| {name} | {n_series} | {n_points} | {verdict} | {vm_ms:.2f} | {st_ms:.2f} | "
                  f"{st_ms / vm_ms:.2f} |")
        print()
        print("| extra query | series | points | answers |")
        print("|---|---|---|---|")
        for name, (path, params) in extra_queries().items():
            s1, b1 = vmc.get(path, dict(params, nocache=1))
            s2, b2 = stc.get(path, params)
            q = params["query"]
            if s2 != 200:
                print(f"| `{q}` | | | Strata: {json.loads(b2).get('error')} |")
                continue
            if s1 != 200:
                print(f"| `{q}` | | | VictoriaMetrics: HTTP {s1} |")
                continue
            st_data = result(b2)
            diffs = compare(name, result(b1), st_data)
            n_points = sum(len(r.get("values", [])) for r in st_data["result"])
            if diffs == ["label sets differ only by __name__ (see below)"]:
                verdict = "same values; MetricsQL keeps __name__ here, Prometheus drops it"
            else:
                verdict = "same" if not diffs else "; ".join(diffs)
            print(f"| `{q}` | {len(st_data['result'])} | {n_points} | {verdict} |")
        bad, total = check_q3_definition(stc, queries()["Q3"])
        notes.append(f"Q3 against Prometheus' extrapolated rate computed from the raw samples: "
                     f"{total - bad} of {total} points within {REL} relative")
        failed |= bad > 0
        print()
        for n in notes:
            print(f"- {n}")
        return 1 if failed else 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()


if __name__ == "__main__":
    sys.exit(main())
