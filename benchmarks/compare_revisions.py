"""Before/after: the inference and CRF-training workloads of this tree against a git revision, in one
process, interleaved.

Timing two revisions in two runs of ``bench_inference.py`` on a shared machine mixes the change with
the machine's drift (minutes apart, 10–30% on a busy 2-core box). This script exports ``--rev`` with
``git archive`` into a temporary directory as the package ``structlearn_rev``, imports it beside the
working tree's ``structlearn`` (both compiled afresh: a private Numba cache folder), checks that both give the same outputs, then
times every workload on both in alternation (``--rounds`` rounds, one thread unless ``--threads``) and
prints the best process CPU time per token of each and their ratio (this tree / revision: > 1 is
slower).

Workloads: ``bench_inference.py``'s chains (``LinearChain.marginals`` edge="sum" and "full" with
``log_partition``; K = 5, 23, 50 on 1,000 sequences of 20–40 tokens and on one of 20,000 tokens) and
semi-Markov models (K:D = 5:4, 10:4); with ``--crf``, the CoNLL-2000 linear-chain CRF objective and
gradient (``kernels.crf.chain_cll`` as L-BFGS calls it; needs the data set); with ``--semicrf``, the
semi-CRF training kernel (``kernels.semicrf.semicrf_expectations``) on 1,000 CoNLL-2000 sentences with
the default and with all segment features.

    python benchmarks/compare_revisions.py --rev HEAD~3 [--rounds 15] [--threads 1] [--crf] [--semicrf]
"""
import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

# both sides compiled afresh in this process (like with like: no on-disk cache for either)
os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="structlearn-compare-"))
import numba  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_inference import make_chain, make_semi  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export_revision(rev, dest):
    """``src/structlearn`` of ``rev`` as the package ``structlearn_rev`` under ``dest``."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "src/structlearn"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    pkg = os.path.join(dest, "structlearn_rev")
    os.rename(os.path.join(dest, "src", "structlearn"), pkg)
    pattern = re.compile(r"\bstructlearn(?=[. ]|$)", re.M)
    for folder, _, files in os.walk(pkg):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                with open(path, "w", encoding="utf-8") as f:
                    f.write(pattern.sub("structlearn_rev", text))
    sys.path.insert(0, dest)
    return importlib.import_module("structlearn_rev")


def chain_job(structures, w, edge):
    def run():
        ch = structures.LinearChain(w.log_b, w.log_a, lengths=w.lengths, start=w.log_pi)
        m = ch.marginals(edge=edge)
        return ch.log_partition(), m.unary, m.edge
    return run


def semi_job(structures, w):
    def run():
        sm = structures.SemiMarkov(w.unary, w.duration, w.trans, lengths=w.lengths, start=w.start,
                                   end=w.end)
        return sm.log_partition(), sm.marginals().unary, sm.segment_marginals()
    return run


def _import_first(package, modules):
    """The first of ``modules`` (paths inside ``package``) that imports: a revision from before the layout
    by model family (engine/kernels/, crf/) has the kernels under kernels/."""
    for i, name in enumerate(modules):
        try:
            return importlib.import_module(package + "." + name)
        except ModuleNotFoundError:
            if i == len(modules) - 1:
                raise


def captured_jobs(packages, model_module, kernel_module, kernel_name, fit):
    """Jobs calling ``kernel_name`` of ``kernel_module`` in each package with the arguments of its last
    call during ``fit()`` (this tree, spying on the name imported by ``model_module``)."""
    model = importlib.import_module("structlearn." + model_module)
    calls = []
    original = getattr(model, kernel_name)

    def spy(*args):
        calls.append(tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args))
        return original(*args)

    setattr(model, kernel_name, spy)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit()
    finally:
        setattr(model, kernel_name, original)
    args = calls[-1]
    jobs = []
    for pkg in packages:
        kernel = getattr(_import_first(pkg.__name__, kernel_module), kernel_name)
        jobs.append(lambda kernel=kernel: kernel(*args))
    return jobs


def crf_jobs(packages):
    """The CoNLL-2000 objective's kernel call, captured from a 3-iteration fit of this tree."""
    from structlearn.datasets import load_conll2000
    from structlearn.crf.linear_chain import LinearChainCRF
    from structlearn.io.conll import featurize
    from structlearn.io.templates import get_template

    X, y = featurize(load_conll2000().train, get_template("chunking"))
    jobs = captured_jobs(packages, "crf._potentials", ("engine.kernels.crf", "kernels.crf"), "chain_cll",
                         lambda: LinearChainCRF(c1=0.0, c2=1.0, max_iterations=3).fit(X, y))
    return jobs, sum(len(s) for s in y)


def semicrf_jobs(packages, features):
    """The semi-CRF training kernel call on 1,000 CoNLL-2000 sentences (as bench_semicrf.py), captured
    from a 3-iteration fit of this tree with segment features ``features``."""
    from structlearn.datasets import load_conll2000
    from structlearn.crf.semi_markov import SemiMarkovCRF
    from structlearn.io.conll import featurize
    from structlearn.io.templates import get_template

    X, y = featurize(load_conll2000().train[:1000], get_template("chunking"))
    est = SemiMarkovCRF(allow_same_label=True, max_iterations=3, segment_features=features)
    jobs = captured_jobs(packages, "crf._semi_markov_potentials", ("engine.kernels.semicrf", "kernels.semicrf"),
                           "semicrf_expectations",
                         lambda: est.fit(X, y))
    return jobs, sum(len(s) for s in y)


def same(a, b):
    for x, z in zip(a, b):
        if x is None or z is None:
            assert x is None and z is None
            continue
        x, z = np.asarray(x), np.asarray(z)
        assert x.shape == z.shape, (x.shape, z.shape)
        np.testing.assert_allclose(x, z, rtol=1e-9, atol=1e-9)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True, help="git revision to compare against (e.g. HEAD~1)")
    ap.add_argument("--rounds", type=int, default=15, help="alternating timing rounds (best of)")
    ap.add_argument("--threads", type=int, default=1, help="Numba threads (default 1: steadier)")
    ap.add_argument("--crf", action="store_true", help="also the CoNLL-2000 CRF objective")
    ap.add_argument("--semicrf", action="store_true",
                    help="also the semi-CRF training kernel on 1,000 CoNLL-2000 sentences")
    ap.add_argument("--only", default="", help="time only the rows whose label contains this")
    args = ap.parse_args(argv)
    numba.set_num_threads(args.threads)
    import structlearn
    import structlearn.structures as here
    with tempfile.TemporaryDirectory() as tmp:
        rev_pkg = export_revision(args.rev, tmp)
        there = importlib.import_module("structlearn_rev.structures")
        rng = np.random.default_rng(0)
        rows = []
        for K in (5, 23, 50):
            for shape, lengths in (("1000x[20,40]", rng.integers(20, 41, size=1000)),
                                   ("1x20000", [20000])):
                w = make_chain(K, lengths, rng)
                for edge in ("sum", "full"):
                    rows.append((f"chain K={K:<3d}{shape:14s}{edge}", w.n_tokens,
                                 [chain_job(s, w, edge) for s in (here, there)]))
        for K, D in ((5, 4), (10, 4)):
            for shape, lengths in (("1000x[20,40]", rng.integers(20, 41, size=1000)),
                                   ("1x20000", [20000])):
                w = make_semi(K, D, lengths, rng)
                rows.append((f"semi  K={K:<3d}{shape:14s}D={D}", w.n_tokens,
                             [semi_job(s, w) for s in (here, there)]))
        if args.crf:
            jobs, n = crf_jobs([structlearn, rev_pkg])
            rows.append(("CRF objective CoNLL-2000 train", n, jobs))
        if args.semicrf:
            for features in (("first", "last"), ("first", "last", "span", "caps")):
                jobs, n = semicrf_jobs([structlearn, rev_pkg], features)
                rows.append((f"semi-CRF CoNLL-2000 1k {'+'.join(features)}", n, jobs))
        print(f"this tree vs {args.rev}: best process CPU ns/token of {args.rounds} alternating "
              f"rounds, {args.threads} thread(s)")
        ratios = []
        for label, n, (mine, theirs) in rows:
            if args.only not in label:
                continue
            same(mine(), theirs())  # also compiles both
            best = [np.inf, np.inf]
            for _ in range(args.rounds):
                for i, job in enumerate((mine, theirs)):
                    c0 = time.process_time()
                    job()
                    best[i] = min(best[i], time.process_time() - c0)
            ratio = best[0] / best[1]
            ratios.append(ratio)
            print(f"{label:40s} tree {best[0] / n * 1e9:9.1f}  rev {best[1] / n * 1e9:9.1f}  "
                  f"ratio {ratio:.3f}", flush=True)
        print(f"geometric mean ratio {np.exp(np.mean(np.log(ratios))):.3f}, "
              f"range {min(ratios):.3f}–{max(ratios):.3f}")


if __name__ == "__main__":
    main()
