"""Run every side-by-side benchmark and print one table of their ratios.

Each script in ``benchmarks/`` measures structlearn and its peer in one run and prints its own table and a
summary line (``geometric mean ratio …``, ``ratio …``, ``× …``). This driver runs them one after the other as
child processes (so one script's Numba threads, imports or crash cannot touch the next), each with a time
limit, and prints, per script: whether it ran, its wall time and its summary lines. A regression is then
visible in one command::

    .venv/bin/python benchmarks/run_all.py --quick          # small settings, a few minutes on 2 cores
    .venv/bin/python benchmarks/run_all.py                  # the scripts' full settings (long)
    .venv/bin/python benchmarks/run_all.py --only hmm,hsmm  # scripts whose name contains one of these
    .venv/bin/python benchmarks/run_all.py --dry-run        # the commands, without running them
    .venv/bin/python benchmarks/run_all.py --markdown       # the final table as Markdown
    .venv/bin/python benchmarks/run_all.py --busy           # idle, then again with both cores kept busy

``--busy`` runs every script twice: on the idle machine, then while this driver keeps the cores busy with
:func:`busy_load` (one process streaming memory — copying a 256 MiB array back and forth, which competes for
memory bandwidth as another process's large arrays do — and one pure-Python CPU loop), started before the
script and stopped after it. Both runs' summary lines and the peak resident memory of the script's process
(``ru_maxrss`` of the child, both sides of the comparison in one process) are printed side by side, so the
busy condition is measured, not guessed.

A script whose peer is not installed reports that itself (and its row shows it); the driver never fails
because a benchmark did: its exit status is 0 unless ``--strict`` is given and a script failed.
"""
import argparse
import contextlib
import os
import pathlib
import re
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent

#: (script, arguments with --quick, arguments of a full run, time limit in seconds with --quick)
BENCHMARKS = [
    ("bench_inference.py", ["--quick"], [], 600),
    ("bench_hmm.py", ["--quick", "--repeat", "1"], [], 600),
    ("bench_hsmm.py", ["--T", "10000", "--peer-T", "500", "--general-T", "500", "--repeat", "1"], [], 900),
    ("bench_hsmm_variants.py", ["--quick"], [], 600),
    ("bench_em_ratio.py", ["--T", "20000", "--repeat", "2"], [], 300),
    ("bench_crf_conll2000.py", ["--max-iterations", "5"], [], 900),
    ("bench_crf_online_trainers.py", ["--train-sentences", "200", "--test-sentences", "100", "--max-iterations", "5",
                                      "--repeat", "1"], [], 900),
    ("bench_crf_many_labels.py", ["--sentences", "200", "--test-sentences", "200", "--iterations", "2"], [], 900),
    ("bench_semicrf.py", ["--sentences", "200", "--iterations", "2"], [], 600),
    ("bench_higher_order.py", ["--quick"], [], 900),
    ("bench_higher_order_segments.py", ["--quick"], [], 900),
    ("bench_tree.py", ["--iterations", "2", "--repeat", "1"], [], 900),
    ("bench_graph_crf.py", ["--n-train", "20", "--n-test", "10", "--max-iterations", "3"], [], 600),
    ("bench_factor_graph.py", ["--quick"], [], 600),
    ("bench_hhmm.py", ["--part", "length", "--lengths", "50,100,200", "--budget", "5"], [], 600),
    ("bench_torch.py", ["--repeat", "1", "--timeout", "60"], [], 900),
    ("bench_distributed.py", ["--quick"], [], 600),
    ("bench_tag_latency.py", ["--quick"], [], 900),
    ("bench_cold_start.py", ["--quick"], [], 1200),
]

#: lines of a script's output that summarise it
SUMMARY = re.compile(r"(geometric mean|ratio|speed-?up|\d\s*[×x]\b|× |slope|efficiency)", re.IGNORECASE)


def summary_lines(text, limit=4):
    """The summary lines of a benchmark's output (those matching :data:`SUMMARY`, the last ``limit`` of
    them; the last non-empty line when none matches)."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    hits = [ln for ln in lines if SUMMARY.search(ln)]
    if not hits:
        return lines[-1:]
    return hits[-limit:]


def commands(quick=True, only=None):
    """(name, argv, limit) of the benchmarks to run (scripts absent from this checkout are left out)."""
    out = []
    for script, q_args, f_args, limit in BENCHMARKS:
        name = script[len("bench_"):-len(".py")]
        if only and not any(o in name for o in only):
            continue
        if not (HERE / script).exists():
            continue
        args = q_args if quick else f_args
        out.append((name, [sys.executable, str(HERE / script), *args], limit if quick else None))
    return out


_MEMORY_STREAM = """
import numpy as np
a = np.ones({mib} * 2**20 // 16)
b = np.empty_like(a)
while True:
    np.copyto(b, a)
    np.copyto(a, b)
"""

_CPU_LOOP = """
x = 0
while True:
    for i in range(100_000):
        x ^= i
"""


@contextlib.contextmanager
def busy_load(mib=256):
    """Keep two cores busy while the block runs: one process streaming memory (copying a ``mib`` MiB array
    back and forth) and one pure-Python CPU loop, both child interpreters; both are killed (and reaped) when
    the block ends. Yields the two :class:`subprocess.Popen`."""
    procs = [subprocess.Popen([sys.executable, "-c", _MEMORY_STREAM.format(mib=int(mib))]),
             subprocess.Popen([sys.executable, "-c", _CPU_LOOP])]
    try:
        time.sleep(1.0)   # let the load reach its steady state (numpy imported, array allocated)
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def run_one(argv, limit):
    """Run one script: (status, seconds, output, peak MiB). Status is "ok", "failed (rc N)" or "timed out";
    the peak is the resident memory high-water mark of the script's process (``ru_maxrss`` from
    ``os.wait4``; None where the platform has none)."""
    t0 = time.perf_counter()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=HERE.parent)
    chunks = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda f, k: chunks[k].append(f.read()), args=(f, k), daemon=True)
               for f, k in ((p.stdout, "out"), (p.stderr, "err"))]
    for r in readers:
        r.start()
    timer = threading.Timer(limit, p.kill) if limit else None
    if timer:
        timer.start()
    peak = None
    if hasattr(os, "wait4"):
        _, wstatus, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(wstatus)
        peak = usage.ru_maxrss / (1024 if sys.platform.startswith("linux") else 2**20)
    else:
        p.wait()
    timed_out = timer is not None and not timer.is_alive() and p.returncode < 0
    if timer:
        timer.cancel()
    for r in readers:
        r.join()
    out, err = "".join(chunks["out"]), "".join(chunks["err"])
    sec = time.perf_counter() - t0
    if timed_out:
        return "timed out", sec, out, peak
    status = "ok" if p.returncode == 0 else f"failed (rc {p.returncode})"
    return status, sec, out + ("\n" + err if p.returncode else ""), peak


def _mib(peak):
    return "-" if peak is None else f"{peak:.0f}"


def table(rows, markdown=False):
    """The final table of (name, condition, status, seconds, peak MiB, summary lines) rows as text."""
    if markdown:
        out = ["| benchmark | machine | status | wall s | peak MiB | summary |",
               "| --- | --- | --- | --- | --- | --- |"]
        for name, cond, status, sec, peak, summ in rows:
            out.append(f"| {name} | {cond} | {status} | {sec:.0f} | {_mib(peak)} | "
                       f"{'<br>'.join(s.strip() for s in summ)} |")
        return "\n".join(out)
    out = [f"{'benchmark':<16} {'machine':<7} {'status':<16} {'wall s':>7} {'peak MiB':>8}  summary"]
    for name, cond, status, sec, peak, summ in rows:
        first, *rest = summ or [""]
        out.append(f"{name:<16} {cond:<7} {status:<16} {sec:7.0f} {_mib(peak):>8}  {first.strip()}")
        out += [f"{'':<58}  {s.strip()}" for s in rest]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small settings (a few minutes in all)")
    ap.add_argument("--only", default=None, help="comma-separated parts of script names")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    ap.add_argument("--markdown", action="store_true", help="print the final table as Markdown")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a benchmark failed")
    ap.add_argument("--verbose", action="store_true", help="print each script's whole output")
    ap.add_argument("--busy", action="store_true",
                    help="run each script idle and again with both cores kept busy (one memory-streaming "
                         "process, one CPU loop)")
    args = ap.parse_args(argv)
    only = [o.strip() for o in args.only.split(",")] if args.only else None
    cmds = commands(args.quick, only)
    if args.dry_run:
        for name, cmd, limit in cmds:
            print(f"{name}: {' '.join(cmd[1:])}" + (f"  (limit {limit} s)" if limit else ""))
        return 0
    rows = []
    conditions = ("idle", "busy") if args.busy else ("idle",)
    for name, cmd, limit in cmds:
        print(f"== {name}: {' '.join(pathlib.Path(c).name if i == 1 else c for i, c in enumerate(cmd[1:], 1))}",
              flush=True)
        for cond in conditions:
            with (busy_load() if cond == "busy" else contextlib.nullcontext()):
                status, sec, text, peak = run_one(cmd, limit)
            if args.verbose:
                print(text)
            summ = summary_lines(text)
            print(f"   {cond}: {status} in {sec:.0f} s, peak {_mib(peak)} MiB: "
                  f"{summ[-1].strip() if summ else ''}", flush=True)
            rows.append((name, cond, status, sec, peak, summ))
    print()
    print(table(rows, args.markdown))
    failed = [r for r in rows if r[1] != "ok"]
    return 1 if (args.strict and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
