"""``structlearn compile``: every estimator family's Numba kernels compiled into the installed package's cache.

Numba compiles a kernel the first time it meets a signature and keeps the machine code in an on-disk cache
(``cache=True``; by default the ``__pycache__`` folder beside the kernel's source, keyed on the source's
content, Numba's version and the CPU). A new environment therefore waited 15-45 s per model family on its
first call. The package's build (``setup.py``) runs this command on the package it is building — the wheel's
copy, or the checkout of an editable install — so the cache ships inside the installed package and a first
``fit`` loads machine code instead of compiling (``docs/performance.md`` has the numbers).

It runs the tiny workloads of :mod:`structlearn.cli.workloads` (one per estimator family: fit and the first
queries a user makes), split over ``--jobs`` processes by a fixed partition, then runs all of them once more
in one process, which compiles whatever a race between the processes lost (two processes saving entries of
one kernel's index at the same time keep only one of them) and reports what it still had to compile.

That final pass also checks that the kernels give the same bits whether compiled in the process that runs
them or loaded from the cache: each workload's outputs (:func:`~structlearn.cli.workloads.digest`) from the
worker that compiled its kernels must equal those of the final pass, which loads them; a difference is an
error (exit status 1). The workers' digests are kept in ``structlearn-compile.json`` beside the cache
(:func:`manifest_path`), so that a test can check the installed package's kernels against them later.

Run it again after moving an installed package to another CPU or Numba version (where the shipped code does
not apply and kernels compile on demand, with a :class:`structlearn.CompilationWarning` saying so), or in
a container image after ``pip install``. ``NUMBA_CACHE_DIR`` (when set) sends the cache there instead.

    structlearn compile [--jobs N] [--families A,B,...] [--check] [-q]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import warnings

__all__ = ["main", "cmd_compile", "run_workloads", "partition", "manifest_path", "read_manifest"]

#: the file, beside the kernels' cache, with the digests of the workloads' outputs from freshly compiled kernels
MANIFEST = "structlearn-compile.json"


def _families(spec):
    from .workloads import WORKLOADS

    if not spec:
        return list(WORKLOADS)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise ValueError(f"--families: unknown {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    return names


def partition(names, jobs):
    """``names`` in at most ``jobs`` groups, one per process: each cluster of families that share kernels
    (:data:`~structlearn.cli.workloads.CLUSTERS`) stays in one group, and the clusters go, largest compile
    cost first, to the group with the least so far (a fixed partition: the same for the same arguments)."""
    from .workloads import CLUSTERS

    wanted = set(names)
    clusters = [([n for n in fams if n in wanted], cost) for fams, cost in CLUSTERS]
    placed = {n for fams, _ in clusters for n in fams}
    clusters += [([n], 1) for n in names if n not in placed]
    clusters = sorted((c for c in clusters if c[0]), key=lambda c: -c[1])
    jobs = max(1, min(int(jobs), len(clusters)))
    groups, loads = [[] for _ in range(jobs)], [0] * jobs
    for fams, cost in clusters:
        j = loads.index(min(loads))
        groups[j].extend(fams)
        loads[j] += cost
    return [g for g in groups if g]


def run_workloads(names, *, log=None):
    """Run the workloads ``names`` in this process; returns ``{name: {"seconds", "compiled", "digest"}}``:
    the wall time, the number of structlearn kernels Numba compiled (rather than loaded from its cache)
    meanwhile, and the digest of the workload's outputs. A workload whose optional dependency is not
    installed (``torch-CRF`` without torch) is left out."""
    import importlib.util

    from .. import _compile_notice
    from .workloads import OPTIONAL, WORKLOADS, digest

    _compile_notice.install()
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _compile_notice.CompilationWarning)
        for name in names:
            if name in OPTIONAL and importlib.util.find_spec(OPTIONAL[name]) is None:
                if log is not None:
                    log(f"  {name:<28} skipped ({OPTIONAL[name]} is not installed)")
                continue
            before = len(_compile_notice.compilations())
            t0 = time.perf_counter()
            result = WORKLOADS[name]()
            out[name] = {"seconds": time.perf_counter() - t0,
                         "compiled": len(_compile_notice.compilations()) - before, "digest": digest(result)}
            if log is not None:
                log(f"  {name:<28} {out[name]['seconds']:7.2f} s  {out[name]['compiled']:4d} kernels compiled")
    return out


def manifest_path():
    """Where ``structlearn compile`` keeps the digests of its workers' outputs: ``NUMBA_CACHE_DIR`` when set,
    else the ``__pycache__`` folder of :mod:`structlearn.engine.kernels` (inside the installed package)."""
    from numba.core import config

    from ..engine import kernels

    folder = config.CACHE_DIR or os.path.join(os.path.dirname(os.path.abspath(kernels.__file__)), "__pycache__")
    return os.path.join(folder, MANIFEST)


def read_manifest():
    """The manifest written by the last ``structlearn compile`` (a dict: ``engine``, the engine digest it
    was made for, hex; ``numba``; ``threads``, Numba's thread count then; ``families``:
    ``{name: {"digest", "compiled"}}``), or None."""
    try:
        with open(manifest_path(), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _write_manifest(results):
    import numba

    from .. import _kernel_cache

    data = {"engine": _kernel_cache.engine_digest().hex(), "numba": numba.__version__,
            "threads": numba.config.NUMBA_NUM_THREADS, "families": {}}
    old = read_manifest()
    if old and all(old.get(key) == data[key] for key in ("engine", "numba", "threads")):
        data["families"].update(old.get("families", {}))  # a run of some families keeps the others'
    data["families"].update({n: {"digest": r["digest"], "compiled": r["compiled"]} for n, r in results.items()})
    data["families"] = dict(sorted(data["families"].items()))
    path = manifest_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
        os.replace(path + ".tmp", path)
    except OSError as exc:  # a read-only installation: the check below still ran
        print(f"structlearn compile: could not write {path} ({exc})", file=sys.stderr)


def _worker(names):
    """Run in a child process: the workloads, quietly; prints their results (JSON) as its last line."""
    print(json.dumps(run_workloads(names)), flush=True)
    return 0


def cmd_compile(args):
    """The ``structlearn compile`` command (see the module docstring)."""
    say = (lambda msg: None) if args.quiet else (lambda msg: print(msg, flush=True))
    names = _families(args.families)
    t0 = time.perf_counter()
    fresh = None
    if not args.check and args.jobs > 1 and len(names) > 1:
        groups = partition(names, args.jobs)
        say(f"structlearn compile: {len(names)} families in {len(groups)} processes")
        procs = [subprocess.Popen([sys.executable, "-m", "structlearn.cli.compile", "--worker", ",".join(g)],
                                  stdout=subprocess.PIPE, text=True) for g in groups]
        outputs = [p.communicate()[0] for p in procs]
        failed = [",".join(g) for g, p in zip(groups, procs) if p.returncode != 0]
        if failed:
            print(f"structlearn compile: a worker failed ({'; '.join(failed)})", file=sys.stderr)
            return 1
        fresh = {}
        for out in outputs:
            fresh.update(json.loads(out.strip().splitlines()[-1]))
        say(f"  workers done in {time.perf_counter() - t0:.1f} s; checking every family in one process")
    results = run_workloads(names, log=say if (args.check or args.jobs <= 1) else None)
    left = sum(r["compiled"] for r in results.values())
    if args.check:
        say(f"structlearn compile --check: {left} kernels compiled now "
            f"({'none was missing' if left == 0 else 'they were missing from the cache'})")
        return 0 if left == 0 else 1
    if fresh is not None:
        differ = [n for n in results if n in fresh and fresh[n]["digest"] != results[n]["digest"]]
        if differ:
            print("structlearn compile: kernels loaded from the cache gave other bits than the same kernels "
                  f"compiled in the process that ran them, for {', '.join(differ)}", file=sys.stderr)
            return 1
    _write_manifest(fresh if fresh is not None else results)
    say(f"structlearn compile: done in {time.perf_counter() - t0:.1f} s"
        + (f" ({left} kernels were compiled by the final pass)" if left else ""))
    return 0


def build_parser(p=None):
    p = p or argparse.ArgumentParser(prog="structlearn compile", description=__doc__.splitlines()[0])
    p.add_argument("--jobs", "-j", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                   help="processes compiling in parallel (default: 2, or 1 on one core)")
    p.add_argument("--families", default=None, metavar="A,B",
                   help="only these families (names as in structlearn.cli.workloads.WORKLOADS)")
    p.add_argument("--check", action="store_true",
                   help="run every workload in this process and exit 1 if any kernel had to be compiled")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    return p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        return _worker(_families(argv[1]))
    return cmd_compile(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
