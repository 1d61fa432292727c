"""Whether ``traceview check`` can be trusted as a CI gate (issue 33): false alarms and detections
over real recordings of one variant on this machine, under whatever load it has (printed).

Records with the collectors on CPU (``traceview collect attention``, fp32, one intra-op thread:
``OMP_NUM_THREADS=1``, and jemalloc preloaded, as docs/ci-check.yml does; ``--malloc system`` records
with glibc malloc, whose heap under the profiler puts ~30 % of processes in a state that takes fresh
pages every step: 2.5x the time for the whole run), the variants taking turns so that the machine's
states fall on all of them:

- ``base``: ``naive`` at ``--seq-len 256``, ``--runs`` times (N >= 8);
- ``slow``: ``naive`` at ``--seq-len 316`` (every op of causal attention is O(seq^2), less the fixed
  costs at this size: ~1.5x the time; the measured ratio is printed), ``--slow-runs`` times;
- ``big``: ``naive`` at ``--seq-len 1180`` (~46x the time: the large scores leave the caches, so time
  grows faster than seq^2; the measured ratio is printed), 3 times;
- ``naive_inplace`` and ``sdpa_math`` at the base shape, once each (structural rules).

Then, with the built-in rules (each trace loaded once; a combination fails when any rule fails):

- every ordered pair of base runs (one baseline: timing cannot judge, fails only beyond 4x);
- every (3 base runs -> 1 other base run): false alarms, must be <= 1 in 50;
- every (3 base runs -> 1 slow run): detections, asked >= 95%;
- the same with 5 base runs (the CI recipe's baseline);
- every (3 base runs -> 1 big run) and every (1 base run -> 1 big run): must all fail;
- naive vs naive_inplace and naive vs sdpa_math fail on structural rules; naive_inplace vs naive passes.

    python benchmarks/bench_check.py                     # record into benchmarks/out/check/, then judge
    python benchmarks/bench_check.py --reuse benchmarks/out/check/20261202-2120   # judge again
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from traceview.atomic import write_bytes

OUT = Path(__file__).resolve().parent / "out" / "check"
SHAPE = ["--device", "cpu", "--dtype", "fp32", "--batch", "2", "--heads", "4", "--head-dim", "64"]
SEQ = {"base": 256, "slow": 316, "big": 1180}
LIBS = ("lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib64", "lib")
JEMALLOC = tuple(f"/usr/{d}/libjemalloc.so.2" for d in LIBS)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def malloc_env(choice: str) -> dict[str, str]:
    """The recordings' environment: one intra-op thread, and jemalloc preloaded unless ``system``."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("LD_PRELOAD", None)
    if choice == "system":
        return env
    lib = next((p for p in ((choice,) if choice != "jemalloc" else JEMALLOC) if Path(p).exists()), None)
    if lib is None:
        raise SystemExit(f"no jemalloc at {choice if choice != 'jemalloc' else ', '.join(JEMALLOC)}: "
                         "apt-get install libjemalloc2, or --malloc system")  # fmt: skip
    return env | {"LD_PRELOAD": lib}


def record(folder: Path, variant: str, seq: int, steps: int, warmup: int, env: dict) -> Path:
    """One recording in a fresh process (as CI would)."""
    done = folder / f"{variant}.json.gz"
    if done.exists():  # --resume: recorded before
        return done
    cmd = [sys.executable, "-m", "traceview", "collect", "attention", *SHAPE, "--seq-len", str(seq),
           "--warmup", str(warmup), "--steps", str(steps), "--variants", variant,
           "--out", str(folder)]  # fmt: skip
    for attempt in range(3):  # a shared checkout: a recording may meet a file mid-edit; say why, retry
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if out.returncode == 0:
            return done
        print(f"recording {folder.name} failed ({attempt + 1}/3): {out.stderr.strip()[-300:]}", flush=True)
    raise SystemExit(f"recording {folder} failed 3 times")


def record_all(root: Path, args) -> None:
    """The variants take turns: round k records base k, slow k, big k (while any are left)."""
    plan = [("base", "naive", SEQ["base"], args.runs), ("slow", "naive", SEQ["slow"], args.slow_runs),
            ("big", "naive", SEQ["big"], 3)]  # fmt: skip
    loads = [f"before: {load()}; malloc: {args.env.get('LD_PRELOAD', 'glibc (system)')}"]
    for k in range(max(n for *_, n in plan)):
        for name, variant, seq, n in plan:
            if k < n:
                steps = args.steps if name != "big" else max(5, args.steps // 4)  # 46x the time per step
                record(root / f"{name}{k:02d}", variant, seq, steps, args.warmup, args.env)
        loads.append(f"round {k + 1} recorded: {load()}")
        print(loads[-1], flush=True)
    for variant in ("naive_inplace", "sdpa_math"):
        record(root / variant, variant, SEQ["base"], args.steps, args.warmup, args.env)
    write_bytes(root / "loads.txt", ("\n".join(loads) + "\n").encode())  # kept for --reuse


def verdict(cand, bases, rules) -> bool:
    """True when every rule holds (check's verdict, without diff's findings on a failure)."""
    from traceview.analyses.variants.check import evaluate

    runs, base_runs = [[cand]], [[b] for b in bases]  # each run one process: one Side
    return all(evaluate(rule, runs, base_runs, None)["status"] != "fail" for rule in rules)


def share(cands, pools, rules) -> tuple[int, int]:
    """(failing, all) combinations of one candidate run against each baseline set."""
    combos = [(c, b) for c in cands for b in pools if all(c is not x for x in b)]  # by identity
    return sum(not verdict(c, b, rules) for c, b in combos), len(combos)


def faults(root: Path) -> dict[str, list[int]]:
    """Each run's median minor page faults per recorded step (the collectors' manifests)."""
    out: dict[str, list[int]] = {}
    for name in SEQ:
        for p in sorted(root.glob(f"{name}[0-9]*/manifest.json")):
            entry = json.loads(p.read_text(encoding="utf-8"))["collected"]["naive"]
            f = entry.get("minor_faults_per_step") or [-1]  # -1: recorded before the collectors counted
            out.setdefault(name, []).append(sorted(f)[len(f) // 2])
    return out


def judge(root: Path) -> dict:
    import traceview as tv
    from traceview.analyses.select.region import Selection
    from traceview.analyses.variants.check import Side, check, run_steps
    from traceview.analyses.variants.check_metrics import check_metrics
    from traceview.analyses.variants.check_rules import read_rules
    from traceview.analyses.variants.check_runs import run_value

    rules = read_rules()
    runs = {name: [Side(tv.load(p / "naive.json.gz", cache=False))
                   for p in sorted(root.glob(f"{name}[0-9]*"))] for name in SEQ}  # fmt: skip
    metric = check_metrics()["cpu_op_time_per_step_ns"]
    fastest = {k: [run_value(run_steps([s], metric, Selection())) / 1e6 for s in v] for k, v in runs.items()}
    base, slow, big = runs["base"], runs["slow"], runs["big"]
    threes = [list(c) for c in itertools.combinations(base, 3)]
    fives = [list(c) for c in itertools.combinations(base, 5)]  # the CI recipe keeps 5
    ones = [[b] for b in base]
    out = {
        "runs": {k: len(v) for k, v in runs.items()},
        "median_page_faults_per_step": faults(root),
        "fastest_step_ms": {k: [round(x, 3) for x in v] for k, v in fastest.items()},
        # the fastest run of each against the base's fastest: the machine's quiet state on both sides
        "work_ratio_slow": float(min(fastest["slow"]) / min(fastest["base"])),
        "work_ratio_big": float(min(fastest["big"]) / min(fastest["base"])),
        "base_spread": float(max(fastest["base"]) / min(fastest["base"])),
        "pairs_false_alarms": share(base, ones, rules),
        "three_to_one_false_alarms": share(base, threes, rules),
        "slow_detected_three_to_one": share(slow, threes, rules),
        "slow_detected_one_to_one": share(slow, ones, rules),
        "five_to_one_false_alarms": share(base, fives, rules),
        "slow_detected_five_to_one": share(slow, fives, rules),
        "big_detected_three_to_one": share(big, threes, rules),
        "big_detected_one_to_one": share(big, ones, rules),
    }
    inplace, math_ = (
        Side(tv.load(root / v / f"{v}.json.gz", cache=False)) for v in ("naive_inplace", "sdpa_math")
    )

    def failed(c, b) -> list[str]:
        t = check(c, b, rules, source="bench")["rules"]
        return t.loc[t["status"] == "fail", "rule"].tolist()

    out["structural"] = {
        "naive vs naive_inplace": failed(base[0], [inplace]),
        "naive vs sdpa_math": failed(base[0], [math_]),
        "naive_inplace vs naive (3 runs)": failed(inplace, base[:3]),
    }
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10, help="recordings of the base variant (>= 8)")
    p.add_argument("--slow-runs", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reuse", type=Path, help="judge the recordings already in this folder")
    p.add_argument("--out", type=Path, default=OUT, help="where a new recording's folder goes")
    p.add_argument("--resume", type=Path, help="record what this folder still lacks, then judge")
    p.add_argument("--malloc", default="jemalloc",
                   help="jemalloc (preloaded: docs/ci-check.yml), a library path, or system")  # fmt: skip
    args = p.parse_args(argv)
    args.env = malloc_env(args.malloc)
    print(f"start: {load()} on {os.cpu_count()} CPUs", flush=True)
    root = args.reuse or args.resume or args.out / time.strftime("%Y%m%d-%H%M%S")
    if args.reuse is None:
        root.mkdir(parents=True, exist_ok=args.resume is not None)  # ignored (benchmarks/out/): not in git
        t0 = time.perf_counter()
        record_all(root, args)
        print(f"recorded in {time.perf_counter() - t0:.0f} s into {root}", flush=True)
    loads = root / "loads.txt"
    during = loads.read_text(encoding="utf-8").splitlines() if loads.exists() else []
    result = judge(root) | {"load_while_recording": during, "load_when_judged": load(), "folder": str(root)}
    write_bytes(root / "results.json", (json.dumps(result, indent=1) + "\n").encode())
    for k, v in result.items():
        print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
