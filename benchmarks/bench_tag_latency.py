"""Latency of ``structlearn tag`` (issue 21 goal 1): warm and cold Numba cache, against python-crfsuite.

Makes its own data from CoNLL-2000 (:func:`structlearn.datasets.load_conll2000`): a linear-chain CRF trained
by ``structlearn learn --format conll`` (chunking template, ``start_end_features=0`` so that python-crfsuite
can open the same weights) on the first ``--train`` training sentences, and the first ``--sentences``
test sentences, as a CoNLL file and as a CRFsuite attribute file. Every timing is the wall time of a new
process (interpreter start, imports, model loading, featurisation, tagging, output):

- ``tag conll (warm)``: ``structlearn tag -m MODEL test.conll`` with the Numba cache filled (median of
  ``--repeat`` runs after one warm-up);
- ``tag conll (estimator path)``: the same through ``LinearChainCRF.load`` + ``predict`` (the path before
  the fast one; what ``-k``/``-i``/``-p`` still take);
- ``tag conll (cold cache)``: the same with an empty ``NUMBA_CACHE_DIR`` (with the tag kernels compiled
  ahead of time by the package's build, :mod:`structlearn.engine.kernels.aot`, nothing is left to compile);
- ``tag conll (JIT kernels, warm / cold)``: the fast path with Numba's JIT kernels instead (the path before
  the ahead-of-time kernels, and what a build without a C compiler takes);
- ``demo kernels (warm / cold cache)``: the kernels ``structlearn demo`` runs (featurise 50 CoNLL-2000
  sentences, fit 3 L-BFGS iterations, score) in a new process with a filled and an empty
  ``NUMBA_CACHE_DIR``: the difference is the compilation the demo triggers;
- ``tag attributes (warm)`` vs ``python-crfsuite``: the CRFsuite attribute file tagged by ``structlearn tag
  --format crfsuite`` and by ``pycrfsuite.Tagger`` on the same model written in CRFsuite's format (its
  process reads the attribute file with a few lines of Python).

Prints the times, the load average, the ratios and whether the outputs agree. ``--quick``: 200 training
sentences, 20 L-BFGS iterations, 2 repeats.

    python benchmarks/bench_tag_latency.py [--quick] [--train N] [--sentences N] [--repeat R] [--data-home DIR]

Needs python-crfsuite (the ``bench`` extra) for the last row; without it that row is skipped.

Measured 2026-12-03 on an idle 2-core machine (load average 1.1), ``--quick``: fast path warm 0.332 s,
cold Numba cache 0.296 s (the tag kernels are compiled ahead of time: nothing left to compile), the same
path on Numba's JIT kernels 1.636 s warm (ratio 4.93) and 15.0 s cold, estimator path 3.32 s, attribute
file 0.353 s vs python-crfsuite 0.125 s (ratio 2.82); outputs identical, python-crfsuite included. What
is left of the 0.33 s: the interpreter 0.02 s, NumPy's import 0.10 s, structlearn's CLI, CoNLL reader and
model-file modules 0.08 s, reading the model 0.02 s, featurising and encoding 100 sentences 0.06 s,
potentials + Viterbi + output 0.01 s. Before the ahead-of-time kernels (a loaded machine, load 4.3):
fast path 3.82 s warm, 57.3 s cold.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

_CLI = "from structlearn.cli.main import main; import sys; sys.exit(main())"
_ESTIMATOR_PATH = ("import structlearn.io.chain_tagger as c; c.open_chain_tagger = lambda path: None\n" + _CLI)
# the demo's kernels on a small slice of its data (featurise, fit 3 L-BFGS iterations, predict, chunk F1):
# with an empty Numba cache this is the compilation `structlearn demo` triggers, with a warm one the rest
_DEMO_KERNELS = """
from structlearn.datasets import load_conll2000
from structlearn.io.conll import featurize
from structlearn.crf.linear_chain import LinearChainCRF
import warnings
warnings.simplefilter("ignore")
data = load_conll2000()
X, y = featurize(data.train[:50], "chunking")
est = LinearChainCRF(max_iterations=3).fit(X, y)
print(est.score(X, y))
"""
# the fast path with Numba's JIT kernels instead of the ahead-of-time compiled ones (structlearn.engine.kernels.aot)
_JIT_PATH = ("import structlearn.engine.kernels.aot as a; a.load = lambda: None\n" + _CLI)
_PYCRFSUITE = r"""
import sys, pycrfsuite
def field(f):  # CRFsuite's "name[:value]", "\\:" a colon and "\\\\" a backslash in the name
    if "\\" not in f:
        name, sep, value = f.partition(":")
        return name, float(value) if sep else 1.0
    name, i = [], 0
    while i < len(f):
        if f[i] == "\\" and i + 1 < len(f):
            name.append(f[i + 1])
            i += 2
        elif f[i] == ":":
            return "".join(name), float(f[i + 1:])
        else:
            name.append(f[i])
            i += 1
    return "".join(name), 1.0
def read(path):
    seqs, cur = [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                if cur:
                    seqs.append(cur)
                cur = []
                continue
            cur.append(dict(field(f) for f in line.split("\t")[1:]))
    if cur:
        seqs.append(cur)
    return seqs
tagger = pycrfsuite.Tagger()
tagger.open(sys.argv[1])
out = []
for x in read(sys.argv[2]):
    out.extend(tagger.tag(x))
    out.append("")
sys.stdout.write("\n".join(out) + "\n")
"""


def _time(cmd, env=None, repeat=1):
    """(median wall seconds, stdout of the last run) of ``cmd`` in a new process."""
    times, out = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:4])}... failed: {res.stderr.strip()[-800:]}")
        out = res.stdout
    return statistics.median(times), out


def _labels(text):
    return [line for line in text.splitlines() if line]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 training sentences, 20 iterations, 2 repeats")
    ap.add_argument("--train", type=int, default=1000, help="training sentences (default 1000)")
    ap.add_argument("--sentences", type=int, default=100, help="test sentences tagged (default 100)")
    ap.add_argument("--iterations", type=int, default=100, help="L-BFGS iterations of learn (default 100)")
    ap.add_argument("--repeat", type=int, default=5, help="warm runs timed (median; default 5)")
    ap.add_argument("--data-home", default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.train, args.iterations, args.repeat = min(args.train, 200), min(args.iterations, 20), 2

    from structlearn.datasets import load_conll2000
    from structlearn.crf.linear_chain import LinearChainCRF
    from structlearn.io import write_crfsuite
    from structlearn.io.conll import featurize
    from structlearn.io.templates import get_template

    data = load_conll2000(data_home=args.data_home)
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        train, test = os.path.join(d, "train.conll"), os.path.join(d, "test.conll")
        for path, sents in ((train, data.train[:args.train]), (test, data.test[:args.sentences])):
            with open(path, "w", encoding="utf-8") as fh:
                fh.write("\n\n".join("\n".join(" ".join(tok) for tok in s) for s in sents) + "\n")
        attrs = os.path.join(d, "test.crfsuite.txt")
        X, y = featurize(data.test[:args.sentences], get_template("chunking"))
        write_crfsuite(X, y, attrs)
        model = os.path.join(d, "model.sl")
        t0 = time.perf_counter()
        subprocess.run([py, "-c", _CLI, "learn", "-q", "--format", "conll", "-m", model, "-p",
                        f"max_iterations={args.iterations}", "-p", "start_end_features=0", train], check=True)
        t_learn = time.perf_counter() - t0
        crfsuite_model = os.path.join(d, "model.crfsuite")
        LinearChainCRF.load(model).save(crfsuite_model, format="crfsuite")
        n_tokens = sum(map(len, data.test[:args.sentences]))

        tag = [py, "-c", _CLI, "tag", "-m", model, test]
        _time(tag)  # warm-up: fills the Numba cache of this checkout
        rows = {}
        rows["tag conll (warm)"], out_fast = _time(tag, repeat=args.repeat)
        rows["tag conll (estimator path)"], out_est = _time([py, "-c", _ESTIMATOR_PATH, *tag[3:]],
                                                            repeat=args.repeat)
        with tempfile.TemporaryDirectory() as cache:
            rows["tag conll (cold cache)"], out_cold = _time(tag, env={**os.environ, "NUMBA_CACHE_DIR": cache})
        jit = [py, "-c", _JIT_PATH, *tag[3:]]
        _time(jit)  # fills the Numba cache of the JIT tag kernels
        rows["tag conll (JIT kernels, warm)"], out_jit = _time(jit, repeat=args.repeat)
        with tempfile.TemporaryDirectory() as cache:
            rows["tag conll (JIT kernels, cold)"], _ = _time(jit, env={**os.environ, "NUMBA_CACHE_DIR": cache})
        demo = [py, "-c", _DEMO_KERNELS]
        _time(demo)
        rows["demo kernels (warm cache)"], _ = _time(demo, repeat=args.repeat)
        with tempfile.TemporaryDirectory() as cache:
            rows["demo kernels (cold cache)"], _ = _time(demo, env={**os.environ, "NUMBA_CACHE_DIR": cache})
        tag_attrs = [py, "-c", _CLI, "tag", "-m", model, "--format", "crfsuite", attrs]
        rows["tag attributes (warm)"], out_attrs = _time(tag_attrs, repeat=args.repeat)
        try:
            import pycrfsuite  # noqa: F401
            rows["python-crfsuite tagger"], out_crf = _time([py, "-c", _PYCRFSUITE, crfsuite_model, attrs],
                                                            repeat=args.repeat)
        except ImportError:
            out_crf = None

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"structlearn tag latency: {args.sentences} CoNLL-2000 test sentences ({n_tokens} tokens), model "
          f"learnt on {args.train} sentences ({args.iterations} iterations max, {t_learn:.1f} s); "
          f"load average {load:.2f} on {os.cpu_count()} cores")
    for name, t in rows.items():
        print(f"  {name:<30} {t:7.3f} s")
    warm = rows["tag conll (warm)"]
    print(f"  ratio estimator path / fast path (warm): {rows['tag conll (estimator path)'] / warm:.2f}")
    print(f"  ratio cold cache / warm:                  {rows['tag conll (cold cache)'] / warm:.2f}")
    print(f"  compilation the demo triggers (cold - warm): "
          f"{rows['demo kernels (cold cache)'] - rows['demo kernels (warm cache)']:.1f} s")
    print(f"  ratio JIT kernels / compiled ahead of time (warm): {rows['tag conll (JIT kernels, warm)'] / warm:.2f}")
    if "python-crfsuite tagger" in rows:
        print(f"  ratio structlearn / python-crfsuite (attribute file, warm): "
              f"{rows['tag attributes (warm)'] / rows['python-crfsuite tagger']:.2f}")
    same = _labels(out_fast) == _labels(out_est) == _labels(out_cold) == _labels(out_attrs) == _labels(out_jit)
    print(f"  outputs: fast = estimator path = cold = attribute file = JIT kernels: {same}"
          + ("" if out_crf is None else f"; = python-crfsuite: {_labels(out_crf) == _labels(out_fast)}"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
