"""`python -m ringkv.fleet`: `ringkv check` fanned out as shards on a Ray cluster, merged into one verdict.

    python -m ringkv.fleet --shards 7 [--address auto] [--gpus-per-shard 1] [--cpus-per-shard 1]
        [--max-retries 3] [--ringkv PATH] [--out DIR] [--json F] [--junit F] [--html F] -- CHECK ARGS...

Each shard is one Ray task running `ringkv check CHECK ARGS --shard I/N --json ...` (docs/fleet.md) with
its resource request (--gpus-per-shard 1 on a GPU cluster). Progress is printed as shards finish. A
shard whose Ray worker died, or whose ringkv process was killed by a signal (the OOM killer), is run
again, up to --max-retries times: a shard is deterministic, so a retry gives the same result. The
shards' JSON reports are written to --out, then `ringkv report merge` gives the report, coverage
verdict and exit code of the unsharded run (0 passed, 1 failed, 2 an error; a shard that never gave a
report is an error naming it).

Every node needs the ringkv CLI, its golden set and the engine at the same paths as the driver (a shared
filesystem or the same image); relative paths in CHECK ARGS are taken from the driver's folder. Ray is
pinned in python/fleet-requirements.txt (scripts/install-engines.sh installs it into .venv).
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .check import find_ringkv
from .errors import CheckError


class ShardProcessDied(Exception):
    """The shard's ringkv process was killed by a signal: retried like a dead worker."""


def run_shard(index, count, ringkv, check_args, cwd, fault=None):
    """One shard, on a Ray worker: its exit code and JSON report (text), and where and how long it ran.

    `fault` ("kill-worker:INDEX:MARKER" or "kill-ringkv:INDEX:MARKER", tests only): the first attempt of
    shard INDEX kills its Ray worker (or its ringkv process), leaving MARKER behind."""
    kill_ringkv = False
    if fault:
        kind, fault_index, marker = fault.split(":", 2)
        if int(fault_index) == index and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(f"{kind} shard {index}/{count} pid {os.getpid()} on {socket.gethostname()}\n")
            if kind == "kill-worker":
                os.kill(os.getpid(), signal.SIGKILL)
            kill_ringkv = kind == "kill-ringkv"
    start = time.time()
    with tempfile.TemporaryDirectory(prefix=f"ringkv-shard-{index}-") as tmp:
        report_path = os.path.join(tmp, "shard.json")
        cmd = [ringkv, "check", "--quiet", *check_args, "--shard", f"{index}/{count}", "--json", report_path]
        if kill_ringkv:  # as the OOM killer would
            cmd = ["sh", "-c", "kill -9 $$"]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd if os.path.isdir(cwd) else None)
        if proc.returncode < 0:
            raise ShardProcessDied(f"shard {index}/{count}: ringkv died of signal {-proc.returncode} on {socket.gethostname()}")
        report = None
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = f.read()
    return {"index": index, "rc": proc.returncode, "report": report, "stdout": proc.stdout, "stderr": proc.stderr[-4000:],
            "host": socket.gethostname(), "seconds": time.time() - start}


def _summary(result):
    import json

    if result["report"] is None:
        return f"exit {result['rc']}, no report"
    report = json.loads(result["report"])
    cases = report.get("cases", [])
    props = report.get("properties", [])
    failed = sum(c["status"] in ("failed", "xpass") for c in cases) + sum(not p["passed"] for p in props)
    return f"exit {result['rc']}, {len(cases)} golden cases and {len(props)} properties, {failed} failed"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    check_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, check_args = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(prog="python -m ringkv.fleet", description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, required=True, help="N: the number of shards (1 to 100000)")
    ap.add_argument("--address", default=None, help="the Ray cluster (e.g. auto, ray://head:10001); default: a local one")
    ap.add_argument("--cpus-per-shard", type=float, default=1, help="each shard's CPU request (default 1)")
    ap.add_argument("--gpus-per-shard", type=float, default=0, help="each shard's GPU request (default 0; 1 on a GPU cluster)")
    ap.add_argument("--max-retries", type=int, default=3, help="runs again of a shard whose worker died (default 3)")
    ap.add_argument("--ringkv", default=None, help="the ringkv CLI (default: $RINGKV, else PATH)")
    ap.add_argument("--out", default="ringkv-shards", help="folder for the shards' JSON reports (default ringkv-shards)")
    ap.add_argument("--json", help="write the merged JSON report")
    ap.add_argument("--junit", help="write the merged JUnit report")
    ap.add_argument("--html", help="write the merged HTML report")
    args = ap.parse_args(argv)
    if not 1 <= args.shards <= 100000:
        ap.error(f"--shards {args.shards}: must be from 1 to 100000")
    if args.max_retries < 0:
        ap.error(f"--max-retries {args.max_retries}: must be 0 or more")
    if any(a == "--shard" or a.startswith("--shard=") or a.startswith("--json") for a in check_args):
        ap.error("the check arguments after -- must not hold --shard or --json: the fleet sets them per shard")
    try:
        ringkv = find_ringkv(args.ringkv)
    except CheckError as e:
        print(f"ringkv.fleet: {e}", file=sys.stderr)
        return 2
    try:
        import ray
    except ImportError:
        print("ringkv.fleet: Ray is not installed: pip install -r python/fleet-requirements.txt (scripts/install-engines.sh)",
              file=sys.stderr)
        return 2

    init = {"address": args.address, "include_dashboard": False, "log_to_driver": False}
    if args.address is None:
        init["num_cpus"] = max(1, os.cpu_count() or 1)
    ray.init(**init)
    try:
        task = ray.remote(num_cpus=args.cpus_per_shard, num_gpus=args.gpus_per_shard, max_retries=args.max_retries,
                          retry_exceptions=[ShardProcessDied])(run_shard)
        fault = os.environ.get("RINGKV_FLEET_FAULT")  # tests: a worker killed mid-run
        n = args.shards
        refs = {task.remote(i, n, ringkv, check_args, os.getcwd(), fault): i for i in range(1, n + 1)}
        print(f"ringkv.fleet: {n} shards on {ray.cluster_resources().get('CPU', 0):g} CPUs, "
              f"{ray.cluster_resources().get('GPU', 0):g} GPUs", file=sys.stderr, flush=True)
        results, lost = {}, {}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = refs[ref]
                try:
                    results[i] = ray.get(ref)
                except Exception as e:  # retries exhausted: the worker kept dying, or ringkv kept being killed
                    lost[i] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
                    print(f"[fleet] shard {i}/{n}: LOST after {args.max_retries} retries: {lost[i]}", file=sys.stderr, flush=True)
                    continue
                r = results[i]
                print(f"[fleet] shard {i}/{n}: {_summary(r)} ({r['seconds']:.1f} s on {r['host']}); "
                      f"{len(results) + len(lost)} of {n} done", file=sys.stderr, flush=True)
    finally:
        ray.shutdown()

    os.makedirs(args.out, exist_ok=True)
    files = []
    for i in range(1, args.shards + 1):
        r = results.get(i)
        if r is None or r["report"] is None:
            why = lost.get(i) or f"ringkv exited {r['rc']} without a report:\n{r['stdout']}{r['stderr']}"
            print(f"ringkv.fleet: ERROR: shard {i}/{args.shards} gave no report: {why}", file=sys.stderr)
            continue
        path = os.path.join(args.out, f"shard-{i}-of-{args.shards}.json")
        with open(path, "w") as f:
            f.write(r["report"])
        files.append(path)
    if len(files) != args.shards:
        print(f"ringkv.fleet: ERROR: {args.shards - len(files)} of {args.shards} shards gave no report; no verdict",
              file=sys.stderr)
        return 2
    merge = [ringkv, "report", "merge", *files]
    for opt in ("json", "junit", "html"):
        if getattr(args, opt):
            merge += [f"--{opt}", getattr(args, opt)]
    return subprocess.run(merge).returncode


if __name__ == "__main__":
    sys.exit(main())
