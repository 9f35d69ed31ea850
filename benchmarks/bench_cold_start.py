"""First call of every estimator family in a fresh environment (issue 36), warm call, and the peers.

Installs the checkout into a new virtual environment — ``pip install .`` (not editable; ``--wheel``: a
wheel built from the checkout, then installed; ``--editable``: the README's ``pip install -e``) — and times
the install. Then, with a fresh ``HOME``, no ``NUMBA_CACHE_DIR`` and the working directory outside the
checkout, runs each family's tiny workload (:data:`structlearn.cli.workloads.WORKLOADS`: fit plus the first
queries on a tiny input) as a new process, the first time ("cold": the first call after install) and
``--repeat`` more times ("warm": the median). Every figure is the wall time of a whole process
(interpreter, imports, fit, predict), as a user's script sees it. Each cold run also reports how many
structlearn kernels Numba had to compile (0 when the install's cache covered the family).

Peers, run by the same interpreter on the same input: python-crfsuite (a tiny CRF fit + tag, as the CRF
row's first ``fit`` + ``predict``) and hmmlearn (the same script as the ``GaussianHMM`` row with only the
import changed: ``from hmmlearn.hmm import GaussianHMM``). They are installed into the benchmark's
environment from the index, with ``torch==2.13.0`` for the ``torch-CRF`` row (``--no-peers`` skips them).

    python benchmarks/bench_cold_start.py [--quick] [--wheel | --editable] [--venv DIR] [--repeat R]
                                          [--families A,B]

``--quick``: the families of the issue's table only (LinearChainCRF, SemiMarkovCRF, GaussianHMM,
HiddenSemiMarkovModel, FactorGraph-bp) and 2 warm repeats. ``--venv DIR`` reuses (or creates) that
environment instead of a temporary one, skipping the install when structlearn is already in it.

Measured numbers are in docs/performance.md ("First call").
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
QUICK = ["LinearChainCRF", "SemiMarkovCRF", "GaussianHMM", "HiddenSemiMarkovModel", "FactorGraph-bp"]

# one family's workload in a new process; prints the structlearn kernels compiled meanwhile
_FAMILY = """
import sys, json
from structlearn.cli.workloads import WORKLOADS
WORKLOADS[sys.argv[1]]()
from structlearn import _compile_notice
print(json.dumps(len(_compile_notice.compilations())))
"""

# the same script for structlearn.hmm and hmmlearn.hmm: import, tiny fit, predict, score
_HMM = """
import numpy as np
from {module} import GaussianHMM
rng = np.random.default_rng(0)
X = np.concatenate([rng.normal(m, 1.0, size=(50, 1)) for m in (0, 3, 6, 0, 3, 6, 0, 3, 6, 0)])
model = GaussianHMM(n_components=3, n_iter=10, random_state=0).fit(X)
print(model.score(X), model.predict(X)[:10])
"""

# a tiny CRF fit + tag: python-crfsuite, and LinearChainCRF on the same data
_CRF_DATA = """
import numpy as np
rng = np.random.default_rng(0)
words = ["the", "a", "dog", "cat", "runs", "sees", "big", "red"]
tag = {"the": "D", "a": "D", "runs": "V", "sees": "V", "big": "A", "red": "A"}
X, y = [], []
for n in range(40):
    ws = rng.choice(words, size=int(rng.integers(3, 9)))
    X.append([{"w=" + w: 1.0, "suf=" + w[-1]: 1.0} for w in ws])
    y.append([tag.get(w, "N") for w in ws])
"""
_PYCRFSUITE = _CRF_DATA + """
import pycrfsuite, os, tempfile
trainer = pycrfsuite.Trainer(verbose=False)
for xs, ys in zip(X, y):
    trainer.append(xs, ys)
trainer.set_params({"c2": 0.1, "max_iterations": 50})
path = os.path.join(tempfile.mkdtemp(), "m.crfsuite")
trainer.train(path)
tagger = pycrfsuite.Tagger()
tagger.open(path)
print(sum(tagger.tag(xs) == ys for xs, ys in zip(X, y)))
"""
_LINEAR_CHAIN = _CRF_DATA + """
from structlearn import LinearChainCRF
crf = LinearChainCRF(c2=0.1, max_iterations=50).fit(X, y)
print(sum(p == ys for p, ys in zip(crf.predict(X), y)))
"""


def _run(python, code, args=(), env=None, cwd=None):
    t0 = time.perf_counter()
    res = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"failed ({args}): {res.stderr.strip()[-1500:]}")
    return dt, res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""


def _install(venv, mode, peers):
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python):
        res = subprocess.run([python, "-c", "import structlearn"], capture_output=True)
        if res.returncode == 0:
            return python, None
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    pip = [python, "-m", "pip", "install", "-q"]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    t0 = time.perf_counter()
    if mode == "wheel":
        with tempfile.TemporaryDirectory() as wheels:
            subprocess.run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, str(ROOT)], check=True,
                           env=env)
            subprocess.run(pip + [str(p) for p in pathlib.Path(wheels).glob("*.whl")], check=True, env=env)
    elif mode == "editable":
        subprocess.run(pip + ["-e", str(ROOT)], check=True, env=env)
    else:
        subprocess.run(pip + [str(ROOT)], check=True, env=env)
    t_install = time.perf_counter() - t0
    if peers:  # and torch for the torch-CRF row (the pinned CPU build of the dev extra)
        subprocess.run(pip + ["python-crfsuite>=0.9.10", "hmmlearn>=0.3", "torch==2.13.0"], check=False, env=env)
    return python, t_install


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the issue's five families, 2 warm repeats")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--wheel", action="store_true", help="install a wheel built from the checkout")
    g.add_argument("--editable", action="store_true", help="pip install -e (the README's command)")
    ap.add_argument("--venv", default=None, help="environment to use or create (default: a temporary one)")
    ap.add_argument("--repeat", type=int, default=3, help="warm runs per family (median; default 3)")
    ap.add_argument("--families", default=None, help="comma-separated workload names (default: all)")
    ap.add_argument("--no-peers", action="store_true", help="do not install or run python-crfsuite, hmmlearn")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat = min(args.repeat, 2)
    mode = "wheel" if args.wheel else "editable" if args.editable else "pip install ."

    tmp = tempfile.mkdtemp(prefix="structlearn-cold-")
    try:
        venv = args.venv or os.path.join(tmp, "venv")
        python, t_install = _install(venv, mode, not args.no_peers)
        home = os.path.join(tmp, "home")
        work = os.path.join(tmp, "work")
        os.makedirs(home)
        os.makedirs(work)
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
        env["HOME"] = home
        if args.families:
            families = args.families.split(",")
        elif args.quick:
            families = QUICK
        else:
            families = json.loads(subprocess.run(
                [python, "-c", "import json; from structlearn.cli.workloads import WORKLOADS; "
                               "print(json.dumps(list(WORKLOADS)))"],
                capture_output=True, text=True, check=True, env=env, cwd=work).stdout)
        rows = []
        for name in families:
            try:
                cold, compiled = _run(python, _FAMILY, [name], env=env, cwd=work)
                warm = statistics.median(_run(python, _FAMILY, [name], env=env, cwd=work)[0]
                                         for _ in range(args.repeat))
            except RuntimeError as exc:
                print(f"  {name}: {exc}", file=sys.stderr)
                continue
            rows.append({"family": name, "cold_s": cold, "warm_s": warm, "compiled": int(compiled or 0)})
        peers = []
        pairs = [("GaussianHMM script (import + fit + predict + score)", _HMM.format(module="structlearn.hmm"),
                  "hmmlearn", _HMM.format(module="hmmlearn.hmm")),
                 ("LinearChainCRF script (import + fit + predict)", _LINEAR_CHAIN, "python-crfsuite", _PYCRFSUITE)]
        for label, ours, peer, theirs in pairs:
            try:
                t_ours = statistics.median(_run(python, ours, env=env, cwd=work)[0] for _ in range(args.repeat))
                t_peer = (None if args.no_peers else
                          statistics.median(_run(python, theirs, env=env, cwd=work)[0] for _ in range(args.repeat)))
            except RuntimeError as exc:
                print(f"  {label}: {exc}", file=sys.stderr)
                continue
            peers.append({"script": label, "ours_s": t_ours, "peer": peer, "peer_s": t_peer})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"First call after install ({mode}{'' if t_install is None else f', install {t_install:.0f} s'}), "
          f"fresh HOME, no NUMBA_CACHE_DIR; load average {load:.2f} on {os.cpu_count()} cores")
    print(f"  {'family':<26} {'first (s)':>9} {'warm (s)':>9} {'first-warm':>10} {'compiled':>8}")
    for r in rows:
        print(f"  {r['family']:<26} {r['cold_s']:9.2f} {r['warm_s']:9.2f} {r['cold_s'] - r['warm_s']:10.2f} "
              f"{r['compiled']:8d}")
    if rows:
        print(f"  largest first - warm: {max(r['cold_s'] - r['warm_s'] for r in rows):.2f} s; kernels compiled "
              f"after install: {sum(r['compiled'] for r in rows)}")
    for p in peers:
        if p["peer_s"] is None:
            print(f"  {p['script']}: {p['ours_s']:.2f} s")
        else:
            print(f"  {p['script']}: {p['ours_s']:.2f} s vs {p['peer']} {p['peer_s']:.2f} s: "
                  f"ratio {p['ours_s'] / p['peer_s']:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"mode": mode, "install_s": t_install, "families": rows, "peers": peers}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
