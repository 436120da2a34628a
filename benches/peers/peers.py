#!/usr/bin/env python3
"""Strata against VictoriaMetrics on one devops workload, measured in one run.

For each system in turn it starts the server on a fresh directory on 127.0.0.1, sends the
same telnet files over one connection per file, waits until every point is queryable, and
records: ingest points/s, the server's CPU seconds per million points, its peak RSS, bytes per
point on disk after a flush and compaction, and the median latency of five queries (Q1-Q5,
below). Every answer's shape (series, points) is checked. It prints a table with the ratio
Strata / VictoriaMetrics per figure and writes the figures as JSON.

The system `strata-auth` is Strata with authentication on: it writes an auth file, starts
Strata with `--auth-file`, sends `auth <token>` first on each telnet connection and a Bearer
header with each HTTP request.

Run it through run.sh, which builds the generator and installs VictoriaMetrics when missing.
Standard library only.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

START = 1_767_225_600  # 2026-01-01T00:00:00Z, the generator's first timestamp
METRICS = [
    "cpu.user", "cpu.system", "cpu.idle", "cpu.iowait", "cpu.steal", "mem.used", "mem.free",
    "mem.cached", "mem.buffered", "disk.read_bytes", "disk.write_bytes", "disk.io_time",
    "net.bytes_recv", "net.bytes_sent", "net.err_in", "net.err_out", "load.1m", "load.5m",
    "proc.running", "proc.total",
]
HOST = "host-0001"
GAUGE = "cpu.user"
COUNTER = "disk.read_bytes"
TICK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def queries(hours, hosts, interval):
    """Q1-Q5 as (OpenTSDB /api/query body, PromQL path and params, expected series, points)."""
    end = START + hours * 3600
    h1, h12, h24 = end - 3600, max(START, end - 12 * 3600), max(START, end - 24 * 3600)
    per_hour = 3600 // interval
    return {
        "Q1": ("one series, raw, last hour",
               {"start": h1, "end": end - 1,
                "queries": [{"metric": GAUGE, "aggregator": "none", "tags": {"host": HOST}}]},
               ("/api/v1/query", {"query": f'{{__name__="{GAUGE}",host="{HOST}"}}[1h]',
                                  "time": end - 1}),
               1, per_hour),
        "Q2": ("sum of 1m averages over every host, 12 h",
               {"start": h12, "end": end - 1,
                "queries": [{"metric": GAUGE, "aggregator": "sum", "downsample": "1m-avg"}]},
               ("/api/v1/query_range", {"query": f'sum(avg_over_time({{__name__="{GAUGE}"}}[1m]))',
                                        "start": h12 + 60, "end": end, "step": 60}),
               1, (end - h12) // max(60, interval)),
        "Q3": ("counter rate of one series, 5m buckets, 24 h",
               {"start": h24, "end": end - 1,
                "queries": [{"metric": COUNTER, "aggregator": "sum", "tags": {"host": HOST},
                             "downsample": "5m-avg", "rate": True,
                             "rateOptions": {"counter": True}}]},
               ("/api/v1/query_range", {"query": f'rate({{__name__="{COUNTER}",host="{HOST}"}}[5m])',
                                        "start": h24 + 300, "end": end, "step": 300}),
               1, (end - h24) // 300),
        "Q4": ("average by dc, 1h buckets, whole set",
               {"start": START, "end": end - 1,
                "queries": [{"metric": GAUGE, "aggregator": "avg", "downsample": "1h-avg",
                             "filters": [{"type": "wildcard", "tagk": "dc", "filter": "*",
                                          "groupBy": True}]}]},
               ("/api/v1/query_range", {"query": f'avg by (dc) (avg_over_time({{__name__="{GAUGE}"}}[1h]))',
                                        "start": START + 3600, "end": end, "step": 3600}),
               4, 4 * hours),
        "Q5": ("last value of every host's series in the last hour",
               {"start": h1, "end": end - 1,
                "queries": [{"metric": GAUGE, "aggregator": "none", "downsample": "0all-last"}]},
               ("/api/v1/query", {"query": f'last_over_time({{__name__="{GAUGE}"}}[1h])',
                                  "time": end - 1}),
               hosts, hosts),
    }


def request(addr, method, path, body=None, timeout=600, auth=None):
    host, port = addr.split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if auth:
            headers["Authorization"] = auth
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def written_bytes(pid):
    """Bytes the process caused to be written to storage (`/proc/<pid>/io`), or 0."""
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def disk_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def wait_quiet(pid, cores=0.05, seconds=2.0, timeout=600):
    """Waits until the server uses less than `cores` CPUs for `seconds`."""
    deadline = time.time() + timeout
    last, t = proc_cpu(pid), time.time()
    while time.time() < deadline:
        time.sleep(seconds)
        now, tn = proc_cpu(pid), time.time()
        if (now - last) / (tn - t) < cores:
            return
        last, t = now, tn


class Server:
    def __init__(self, work, name, port):
        self.dir = os.path.join(work, f"{name}-data")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.addr = f"127.0.0.1:{port}"
        self.log = open(os.path.join(work, f"{name}.log"), "w")
        self.proc = None
        # The Authorization header of every HTTP request, and the telnet line sent first.
        self.auth = None
        self.telnet_hello = b""

    @property
    def pid(self):
        return self.proc.pid

    def query_request(self, method, path, body=None):
        """A request on one kept-alive connection, so query latency leaves out connection set-up
        (as a dashboard's client does)."""
        for attempt in (0, 1):
            if getattr(self, "conn", None) is None:
                host, port = self.addr.split(":")
                self.conn = http.client.HTTPConnection(host, int(port), timeout=600)
            try:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                if self.auth:
                    headers["Authorization"] = self.auth
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def spawn(self, cmd, ready_path):
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if request(self.addr, "GET", ready_path, timeout=2, auth=self.auth)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{cmd[0]} did not answer on {self.addr}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Strata(Server):
    name = "strata"
    TOKEN = "peers-bench-token-0123456789"

    def __init__(self, args, auth=False):
        super().__init__(args.work, self.name, 24242)
        self.telnet = self.addr
        cmd = [args.strata, "serve", "--bind", "127.0.0.1", "--port", "24242",
               "--data-dir", self.dir]
        if auth:
            path = os.path.join(args.work, "strata-auth.toml")
            with open(path, "w") as f:
                f.write(f'[[tokens]]\nname = "bench"\ntoken = "{self.TOKEN}"\n'
                        'roles = ["read", "write", "admin"]\n')
            cmd += ["--auth-file", path]
            self.auth = f"Bearer {self.TOKEN}"
            self.telnet_hello = f"auth {self.TOKEN}\n".encode()
        self.spawn(cmd, "/api/version")

    def count(self, hours):
        body = {"start": START, "end": START + hours * 3600 - 1,
                "queries": [{"metric": m, "aggregator": "sum", "downsample": "0all-count"}
                            for m in METRICS]}
        st, data = request(self.addr, "POST", "/api/query", json.dumps(body), auth=self.auth)
        if st != 200:
            return 0
        return int(sum(v for s in json.loads(data) for v in s["dps"].values()))

    def settle(self):
        st, data = request(self.addr, "POST", "/api/admin/compact", "{}", auth=self.auth)
        if st != 200:
            raise RuntimeError(f"compact answered {st}: {data[:200]}")

    def query(self, q):
        st, data = self.query_request("POST", "/api/query", json.dumps(q[1]))
        if st != 200:
            raise RuntimeError(f"HTTP {st}: {data[:300]}")
        out = json.loads(data)
        return len(out), sum(len(s["dps"]) for s in out)


class StrataAuth(Strata):
    name = "strata-auth"

    def __init__(self, args):
        super().__init__(args, auth=True)


class VictoriaMetrics(Server):
    name = "vm"

    def __init__(self, args):
        super().__init__(args.work, "vm", 28428)
        self.telnet = "127.0.0.1:24243"
        self.spawn(["victoria-metrics", f"-storageDataPath={self.dir}", "-retentionPeriod=10y",
                    "-search.maxUniqueTimeseries=10000000",
                    f"-httpListenAddr={self.addr}", f"-opentsdbListenAddr={self.telnet}"],
                   "/health")

    def count(self, hours):
        q = {"query": f'sum(count_over_time({{__name__!=""}}[{hours + 2}h]))',
             "time": START + hours * 3600, "nocache": 1}
        st, data = request(self.addr, "GET", "/api/v1/query?" + urllib.parse.urlencode(q))
        res = json.loads(data)["data"]["result"] if st == 200 else []
        return int(float(res[0]["value"][1])) if res else 0

    def settle(self):
        request(self.addr, "GET", "/internal/force_flush")
        prefix = time.strftime("%Y_%m", time.gmtime(START))
        request(self.addr, "GET", "/internal/force_merge?partition_prefix=" + prefix)

    def query(self, q):
        path, params = q[2]
        params = dict(params, nocache=1)
        st, data = self.query_request("GET", path + "?" + urllib.parse.urlencode(params))
        if st != 200:
            raise RuntimeError(f"HTTP {st}: {data[:300]}")
        res = json.loads(data)["data"]["result"]
        return len(res), sum(len(s["values"]) if "values" in s else 1 for s in res)


def send(addr, path, hello=b""):
    host, port = addr.split(":")
    with socket.create_connection((host, int(port))) as s, open(path, "rb") as f:
        s.sendall(hello)
        while chunk := f.read(1 << 20):
            s.sendall(chunk)
        s.shutdown(socket.SHUT_WR)
        # Both servers close the connection once they have read everything; the count that
        # follows is what tells that every point is in.
        s.settimeout(30)
        try:
            while s.recv(65536):
                pass
        except socket.timeout:
            pass


def server_cpu_per_query(srv, q, secs):
    """The server's CPU time per query, in ms, over back-to-back queries for at least `secs`.

    /proc counts CPU time in ticks of 10 ms, which a median of a dozen sub-millisecond queries
    cannot resolve; and a sub-millisecond latency is mostly this client's own parsing and the
    loopback round trip, which are the same for every server. This figure is the server's
    share alone."""
    n, cpu0, t0 = 0, proc_cpu(srv.pid), time.time()
    while n < 3 or time.time() - t0 < secs:
        srv.query(q)
        n += 1
    return (proc_cpu(srv.pid) - cpu0) * 1000 / n


def measure(cls, args, files, expected):
    srv = cls(args)
    try:
        cpu0, t0 = proc_cpu(srv.pid), time.time()
        threads = [threading.Thread(target=send, args=(srv.telnet, f, srv.telnet_hello)) for f in files]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.time() + args.timeout
        while (got := srv.count(args.hours)) < expected:
            if time.time() > deadline:
                raise RuntimeError(f"only {got} of {expected} points became queryable")
            time.sleep(0.5)
        elapsed = time.time() - t0
        wait_quiet(srv.pid)
        cpu = proc_cpu(srv.pid) - cpu0
        written = written_bytes(srv.pid)
        srv.settle()
        wait_quiet(srv.pid)
        out = {
            "ingest_points_per_s": expected / elapsed,
            "cpu_s_per_million": cpu * 1e6 / expected,
            "peak_rss_mib": peak_rss(srv.pid) / 2**20,
            "bytes_per_point": disk_bytes(srv.dir) / expected,
            # Everything written to storage during ingest (WAL, flushes, compactions), per point.
            "written_bytes_per_point": written / expected,
        }
        for name, q in queries(args.hours, args.hosts, args.interval).items():
            for _ in range(args.warmup):
                srv.query(q)
            lat, shape = [], None
            for _ in range(args.reps):
                t = time.perf_counter()
                shape = srv.query(q)
                lat.append((time.perf_counter() - t) * 1000)
            want = (q[3], q[4])
            ok = shape[0] == want[0] and abs(shape[1] - want[1]) <= want[0]
            out[f"{name}_ms"] = statistics.median(lat)
            out[f"{name}_server_cpu_ms"] = server_cpu_per_query(srv, q, args.cpu_secs)
            out[f"{name}_shape"] = f"{shape[0]}x{shape[1]}" + ("" if ok else f" (want {want[0]}x{want[1]})")
        log(f"{cls.name}: {out}")
        return out
    finally:
        srv.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strata", required=True, help="the strata binary")
    p.add_argument("--data", required=True, help="prefix of the telnet files (<prefix>.0 ...)")
    p.add_argument("--split", type=int, default=4)
    p.add_argument("--expected", type=int, required=True, help="points in the files")
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--hours", type=int, default=24)
    p.add_argument("--interval", type=int, default=10)
    p.add_argument("--systems", default="strata vm")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--cpu-secs", type=float, default=3.0,
                   help="seconds of back-to-back queries for each query's server CPU figure")
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    files = [f"{args.data}.{i}" for i in range(args.split)]
    systems = {"strata": Strata, "strata-auth": StrataAuth, "vm": VictoriaMetrics}
    results = {s: measure(systems[s], args, files, args.expected) for s in args.systems.split()}
    with open(args.out, "w") as f:
        json.dump({"hosts": args.hosts, "hours": args.hours, "interval": args.interval,
                   "split": args.split, "points": args.expected, "results": results}, f, indent=1)
    names = list(results)
    # A ratio column to VictoriaMetrics for each other system, when it ran.
    peers = [n for n in names if n != "vm"] if "vm" in names else []
    print(f"{args.hosts * 20} series, {args.expected} points, {args.split} connections")
    print("| figure | " + " | ".join(names) + " |" + "".join(f" {n} / vm |" for n in peers))
    print("|---" * (len(names) + 1 + len(peers)) + "|")
    for key in results[names[0]]:
        vals = [results[n][key] for n in names]
        cells = [f"{v:.3g}" if isinstance(v, float) else str(v) for v in vals]
        ratios = ""
        vm = results["vm"][key] if peers else None
        for n in peers:
            v = results[n][key]
            ok = isinstance(v, float) and isinstance(vm, float) and vm
            ratios += f" {v / vm:.2f}× |" if ok else " |"
        print(f"| {key} | " + " | ".join(cells) + " |" + ratios)


if __name__ == "__main__":
    main()
