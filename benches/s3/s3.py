#!/usr/bin/env python3
"""Strata on S3 object storage against Strata on the local disk, on one devops workload.

Systems, measured one after the other in one run on the same telnet files:
- `strata`: the embedded default, SSTs and manifest on the local disk;
- `strata-s3`: a writer with `--store s3://strata/bench` on a SeaweedFS started here on
  127.0.0.1 (fresh for each system), the WAL and a disk cache in its data directory;
- `strata-2w`: two S3 writers on one prefix, `--salt-buckets 0-9` and `10-19`, each sent the
  points of the series in its buckets (routed beforehand as `docs/operations-s3.md` shows, with
  names assigned through one writer's `/api/uid/assign`); CPU is the sum of both processes';
- `strata-replica`: loads the set into an S3 writer as `strata-s3` does, flushes it, then starts
  a `--read-only` replica on a second, empty data directory and measures its queries: the first
  run of each query (cold cache: every block comes from the bucket) and the median of the
  repeats after it (warm cache). Ingest figures are the writer's.

Besides the figures of `benches/peers/peers.py`, it records the S3 requests the server made
(`strata_store_requests` in `/metrics`) per million points, and the SeaweedFS process tree's
CPU. It prints a table with the ratio of each system to `strata`.

Run it through run.sh, which builds what it needs and installs SeaweedFS into a venv. Standard
library only, but for `strata-2w`, whose routing needs the `xxhash` package (run.sh runs this
with the venv's Python, which has it).
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
import peers  # noqa: E402

ACCESS_KEY = "strata-bench"
SECRET_KEY = "strata-bench-secret"
BUCKET = "strata"
PREFIX = "bench"
STRATA_PORT = 24242
REPLICA_PORT = 24252


def free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(n, low=21000, high=45000):
    """`n` free ports below 55535 whose port + 10000 (SeaweedFS's gRPC port) is free too."""
    found, port = [], low + os.getpid() % (high - low)
    while len(found) < n:
        port = low if port + 1 >= high else port + 1
        if free(port) and free(port + 10000):
            found.append(port)
    return found


def answers_http(port):
    """Whether 127.0.0.1:`port` answers an HTTP request (anonymous ones get a 403)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
            c.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return c.recv(12).startswith(b"HTTP/1.1 ")
    except OSError:
        return False


def tree_cpu(pid):
    """CPU seconds of a process and its children that are still running."""
    total = 0.0
    try:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                             text=True).stdout.split()
    except OSError:
        out = []
    for child in out:
        total += tree_cpu(int(child))
    try:
        total += peers.proc_cpu(pid)
    except OSError:
        pass
    return total


class Seaweed:
    """SeaweedFS with an S3 gateway on free 127.0.0.1 ports, and the bucket `strata`."""

    def __init__(self, weed, work):
        self.dir = os.path.join(work, "seaweed")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "data"))
        config = os.path.join(self.dir, "s3.json")
        with open(config, "w") as f:
            json.dump({"identities": [{
                "name": ACCESS_KEY,
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        self.ports = master, volume, filer, s3 = free_ports(4)
        self.endpoint = f"http://127.0.0.1:{s3}"
        self.log = open(os.path.join(self.dir, "weed.log"), "w")
        self.proc = subprocess.Popen(
            [weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             f"-dir={self.dir}/data", f"-master.port={master}", f"-volume.port={volume}",
             f"-filer.port={filer}", "-filer", "-s3", f"-s3.port={s3}", f"-s3.config={config}",
             "-master.telemetry=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
             f"-filer.localSocket={self.dir}/filer.sock", f"-s3.localSocket={self.dir}/s3.sock"],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 90
        while not answers_http(s3):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"SeaweedFS's S3 port {s3} did not answer")
            time.sleep(0.2)
        while True:
            out = subprocess.run([weed, "shell", f"-master=127.0.0.1:{master}"],
                                 input=f"s3.bucket.create -name {BUCKET}\n",
                                 capture_output=True, text=True).stdout
            if f"created bucket {BUCKET}" in out:
                break
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"SeaweedFS did not create the bucket: {out}")
            time.sleep(0.5)

    def env(self):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        for k in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN"):
            env.pop(k, None)
        return env

    def cpu(self):
        return tree_cpu(self.proc.pid)

    def stop(self):
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()
        for kind, port in zip(["master", "volume", "filer", "s3"], self.ports):
            try:
                os.remove(f"/tmp/seaweedfs-{kind}-grpc-{port + 10000}.sock")
            except FileNotFoundError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def store_metric(addr, name):
    """The sum of a `/metrics` family over its labels (`strata_store_requests`: every kind)."""
    st, data = peers.request(addr, "GET", "/metrics")
    if st != 200:
        return 0
    total = 0
    for line in data.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def store_requests(addr):
    return store_metric(addr, "strata_store_requests")


def store_written(addr):
    st, data = peers.request(addr, "GET", "/metrics")
    for line in data.decode().splitlines() if st == 200 else []:
        if line.startswith('strata_store_bytes{direction="written"}'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


class StrataOn(peers.Server):
    """Strata on the local disk, or on `seaweed` with `extra` flags."""

    def __init__(self, args, name, port, seaweed=None, extra=(), data_dir=None):
        super().__init__(args.work, name, port)
        if data_dir:
            self.dir = data_dir
        self.telnet = self.addr
        cmd = [args.strata, "serve", "--bind", "127.0.0.1", "--port", str(port),
               "--data-dir", self.dir]
        env = None
        if seaweed:
            cmd += ["--store", f"s3://{BUCKET}/{PREFIX}", "--s3-endpoint", seaweed.endpoint]
            env = seaweed.env()
        cmd += list(extra)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log, env=env)
        deadline = time.time() + 60
        while True:
            try:
                if peers.request(self.addr, "GET", "/api/version", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"strata did not answer on {self.addr}")
            time.sleep(0.2)

    count = peers.Strata.count
    query = peers.Strata.query

    def settle(self):
        st, data = peers.request(self.addr, "POST", "/api/admin/compact", "{}")
        if st != 200:
            raise RuntimeError(f"compact answered {st}: {data[:200]}")


def ingest(srv, args, files, expected):
    """Sends the files and waits until every point is queryable; the ingest figures."""
    cpu0, t0 = peers.proc_cpu(srv.pid), time.time()
    threads = [threading.Thread(target=peers.send, args=(srv.telnet, f)) for f in files]
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
    peers.wait_quiet(srv.pid)
    cpu = peers.proc_cpu(srv.pid) - cpu0
    return {
        "ingest_points_per_s": expected / elapsed,
        "cpu_s_per_million": cpu * 1e6 / expected,
        "peak_rss_mib": peers.peak_rss(srv.pid) / 2**20,
        "written_bytes_per_point": peers.written_bytes(srv.pid) / expected,
    }


def latencies(srv, args, out, cold=False):
    """Q1–Q5: the median of the repeats (after the warm-up runs), and with `cold` the first
    run's latency too, before anything is cached."""
    for name, q in peers.queries(args.hours, args.hosts, args.interval).items():
        lat, shape = [], None
        for i in range(args.warmup + args.reps):
            t = time.perf_counter()
            shape = srv.query(q)
            ms = (time.perf_counter() - t) * 1000
            if i == 0 and cold:
                out[f"{name}_cold_ms"] = ms
            if i >= args.warmup:
                lat.append(ms)
        want = (q[3], q[4])
        ok = shape[0] == want[0] and abs(shape[1] - want[1]) <= want[0]
        out[f"{name}_ms"] = statistics.median(lat)
        out[f"{name}_shape"] = f"{shape[0]}x{shape[1]}" + ("" if ok else f" (want {want[0]}x{want[1]})")


def measure_local(args, files, expected):
    srv = StrataOn(args, "strata", STRATA_PORT)
    try:
        out = ingest(srv, args, files, expected)
        srv.settle()
        peers.wait_quiet(srv.pid)
        out["bytes_per_point"] = peers.disk_bytes(srv.dir) / expected
        latencies(srv, args, out)
        return out
    finally:
        srv.stop()


def flush_interval_flags(args):
    return ["--store-flush-interval-ms", str(args.flush_interval_ms)]


def measure_s3(args, files, expected):
    seaweed = Seaweed(args.weed, args.work)
    srv = None
    try:
        weed0 = seaweed.cpu()
        srv = StrataOn(args, "strata-s3", STRATA_PORT, seaweed, flush_interval_flags(args))
        req0 = store_requests(srv.addr)
        out = ingest(srv, args, files, expected)
        out["s3_requests_per_million"] = (store_requests(srv.addr) - req0) * 1e6 / expected
        out["seaweed_cpu_s_per_million"] = (seaweed.cpu() - weed0) * 1e6 / expected
        # Uploads during ingest (flushes and compactions) per point: the bucket's side of
        # written_bytes_per_point, which counts the WAL and the disk cache's copies.
        out["uploaded_bytes_per_point"] = store_written(srv.addr) / expected
        srv.settle()
        peers.wait_quiet(srv.pid)
        latencies(srv, args, out)
        return out
    finally:
        if srv:
            srv.stop()
        seaweed.stop()


def measure_replica(args, files, expected):
    seaweed = Seaweed(args.weed, args.work)
    writer = replica = None
    cache = os.path.join(args.work, "strata-replica-data")
    replica_flags = ["--read-only", "--refresh-ms", "1000"]

    def fresh_replica(extra=()):
        shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(cache)
        return StrataOn(args, "strata-replica", REPLICA_PORT, seaweed,
                        replica_flags + list(extra), data_dir=cache)

    try:
        writer = StrataOn(args, "strata-replica-writer", STRATA_PORT, seaweed,
                          flush_interval_flags(args))
        out = ingest(writer, args, files, expected)
        writer.settle()
        peers.wait_quiet(writer.pid)
        # Warm: a replica with the default disk cache (its open fetches the files that fit),
        # after a count that reads every block once.
        t = time.time()
        replica = fresh_replica()
        out["replica_open_s"] = time.time() - t
        deadline = time.time() + args.timeout
        while (got := replica.count(args.hours)) < expected:
            if time.time() > deadline:
                raise RuntimeError(f"the replica saw {got} of {expected} points")
            time.sleep(0.5)
        latencies(replica, args, out)
        replica.stop()
        # Cold: no disk cache at all, so the first run of each query reads its blocks from
        # the bucket.
        replica = fresh_replica(["--cache-disk-mb", "0"])
        cold = {}
        latencies(replica, args, cold, cold=True)
        out.update({k: v for k, v in cold.items() if k.endswith("_cold_ms")})
        return out
    finally:
        for s in (replica, writer):
            if s:
                s.stop()
        seaweed.stop()


def uid_assign(addr, names):
    """UIDs (bytes) of `{kind: [name, ...]}`, assigning new ones, through `/api/uid/assign`."""
    import re
    body = json.dumps({k: sorted(v) for k, v in names.items()})
    st, data = peers.request(addr, "POST", "/api/uid/assign", body)
    reply = json.loads(data)
    out = {}
    for kind, wanted in names.items():
        for name in wanted:
            hexuid = reply.get(kind, {}).get(name)
            if hexuid is None:
                err = reply.get(kind + "_errors", {}).get(name, "")
                m = re.search(r"UID: ([0-9A-Fa-f]+)", err)
                if not m:
                    raise RuntimeError(f"no UID for {kind} {name}: HTTP {st} {data[:300]}")
                hexuid = m.group(1)
            out[(kind, name)] = bytes.fromhex(hexuid)
    return out


def route(args, files, writers, addr):
    """Splits each telnet file into one file per writer by the salt of each line's series.
    `writers` is a list of salt ranges; returns the files per writer."""
    import xxhash
    series = {}
    names = {"metric": set(), "tagk": set(), "tagv": set()}
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                parts = line.split()
                key = (parts[1], tuple(parts[4:]))
                if key not in series:
                    series[key] = None
                    names["metric"].add(parts[1].decode())
                    for kv in parts[4:]:
                        k, v = kv.decode().split("=", 1)
                        names["tagk"].add(k)
                        names["tagv"].add(v)
    uids = uid_assign(addr, names)
    buckets = args.salt_buckets
    for key in series:
        metric, tags = key
        pairs = sorted((uids[("tagk", k)], uids[("tagv", v)])
                       for k, v in (kv.decode().split("=", 1) for kv in tags))
        tsuid = uids[("metric", metric.decode())] + b"".join(k + v for k, v in pairs)
        salt = xxhash.xxh3_64_intdigest(tsuid) % buckets
        series[key] = next(i for i, owned in enumerate(writers) if salt in owned)
    out = [[] for _ in writers]
    for n, path in enumerate(files):
        sinks = [open(os.path.join(args.work, f"routed-w{w}.{n}"), "wb") for w in range(len(writers))]
        with open(path, "rb") as f:
            for line in f:
                parts = line.split()
                sinks[series[(parts[1], tuple(parts[4:]))]].write(line)
        for w, sink in enumerate(sinks):
            sink.close()
            out[w].append(sink.name)
    return out


def measure_two_writers(args, files, expected):
    seaweed = Seaweed(args.weed, args.work)
    ranges = [range(0, args.salt_buckets // 2), range(args.salt_buckets // 2, args.salt_buckets)]
    servers = []
    try:
        for i, r in enumerate(ranges):
            flags = flush_interval_flags(args) + ["--salt-buckets", f"{r.start}-{r.stop - 1}"]
            servers.append(StrataOn(args, f"strata-2w-{i}", STRATA_PORT + 20 * i, seaweed,
                                    flags))
        t = time.time()
        routed = route(args, files, ranges, servers[0].addr)
        peers.log(f"strata-2w: routed the files in {time.time() - t:.0f} s")
        cpu0 = [peers.proc_cpu(s.pid) for s in servers]
        weed0 = seaweed.cpu()
        t0 = time.time()
        # As many connections in all as one writer gets: each sends its share of the files
        # one after the other, so each series still arrives in time order on one connection.
        per_writer = max(1, len(files) // len(servers))

        def send_all(addr, paths):
            for path in paths:
                peers.send(addr, path)

        threads = [threading.Thread(target=send_all, args=(s.telnet, fs[i::per_writer]))
                   for s, fs in zip(servers, routed) for i in range(per_writer)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.time() + args.timeout
        while (got := sum(s.count(args.hours) for s in servers)) < expected:
            if time.time() > deadline:
                raise RuntimeError(f"only {got} of {expected} points became queryable")
            time.sleep(0.5)
        elapsed = time.time() - t0
        for s in servers:
            peers.wait_quiet(s.pid)
        cpu = sum(peers.proc_cpu(s.pid) - c for s, c in zip(servers, cpu0))
        return {
            "ingest_points_per_s": expected / elapsed,
            "cpu_s_per_million": cpu * 1e6 / expected,
            "peak_rss_mib": sum(peers.peak_rss(s.pid) for s in servers) / 2**20,
            "written_bytes_per_point": sum(peers.written_bytes(s.pid) for s in servers) / expected,
            "s3_requests_per_million": sum(store_requests(s.addr) for s in servers) * 1e6 / expected,
            "seaweed_cpu_s_per_million": (seaweed.cpu() - weed0) * 1e6 / expected,
        }
    finally:
        for s in servers:
            s.stop()
        seaweed.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strata", required=True, help="the strata binary")
    p.add_argument("--weed", required=True, help="SeaweedFS's weed binary")
    p.add_argument("--data", required=True, help="prefix of the telnet files (<prefix>.0 ...)")
    p.add_argument("--split", type=int, default=4)
    p.add_argument("--expected", type=int, required=True, help="points in the files")
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--hours", type=int, default=24)
    p.add_argument("--interval", type=int, default=10)
    p.add_argument("--systems", default="strata strata-s3")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--flush-interval-ms", type=int, default=10000,
                   help="the S3 writer's --store-flush-interval-ms")
    p.add_argument("--salt-buckets", type=int, default=20,
                   help="the bucket count, split in halves between strata-2w's writers")
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    files = [f"{args.data}.{i}" for i in range(args.split)]
    systems = {"strata": measure_local, "strata-s3": measure_s3,
               "strata-replica": measure_replica, "strata-2w": measure_two_writers}
    results = {}
    for s in args.systems.split():
        results[s] = systems[s](args, files, args.expected)
        peers.log(f"{s}: {results[s]}")
    with open(args.out, "w") as f:
        json.dump({"hosts": args.hosts, "hours": args.hours, "interval": args.interval,
                   "split": args.split, "points": args.expected, "results": results}, f, indent=1)
    names = list(results)
    base_name = "strata" if "strata" in names else names[0]
    others = [n for n in names if n != base_name]
    keys = []
    for n in names:
        keys += [k for k in results[n] if k not in keys]
    print(f"{args.hosts * 20} series, {args.expected} points, {args.split} connections")
    print("| figure | " + " | ".join(names) + " |" + "".join(f" {n} / {base_name} |" for n in others))
    print("|---" * (len(names) + 1 + len(others)) + "|")
    for key in keys:
        vals = [results[n].get(key, "") for n in names]
        cells = [f"{v:.3g}" if isinstance(v, float) else str(v) for v in vals]
        ratios = ""
        base = results[base_name].get(key)
        if key.endswith("_cold_ms"):
            base = results[base_name].get(key.replace("_cold", ""))
        for n in others:
            v = results[n].get(key)
            ok = isinstance(v, float) and isinstance(base, float) and base
            ratios += f" {v / base:.2f}× |" if ok else " |"
        print(f"| {key} | " + " | ".join(cells) + " |" + ratios)


if __name__ == "__main__":
    main()
