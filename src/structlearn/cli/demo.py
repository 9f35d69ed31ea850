"""``structlearn demo``: the main job, a chunker trained and evaluated on CoNLL-2000 with wall times."""
import time

from .common import CLIError, say
from .learn import fit
from .params import param_help, parse_params

__all__ = ["cmd_demo"]


def cmd_demo(args):
    from ..datasets import load_conll2000
    from ..io.conll import featurize
    from ..metrics import conlleval

    from ..crf.linear_chain import LinearChainCRF

    defaults = LinearChainCRF().get_params()
    if param_help(args.param, LinearChainCRF, defaults):
        return 0
    params = {"algorithm": args.algorithm, "c2": 1.0, **parse_params(args.param, defaults)}
    if args.max_iterations is not None:
        if args.max_iterations < 1:
            raise CLIError(f"--max-iterations must be a positive integer; got {args.max_iterations}")
        params["max_iterations"] = args.max_iterations
    quiet = args.quiet
    t_start = time.perf_counter()
    try:
        data = load_conll2000(args.data_home, download_if_missing=args.download)
    except FileNotFoundError as exc:
        raise CLIError(f"{exc} Or pass --data-home DIR (a folder holding conll2000/train.txt.gz and "
                       f"test.txt.gz), set $STRUCTLEARN_DATA, or rerun with --download.") from None
    n_train = sum(len(s) for s in data.train)
    n_test = sum(len(s) for s in data.test)
    if not quiet:
        say("structlearn demo: linear-chain CRF chunker on CoNLL-2000 (chunking template, "
             + " ".join(f"{k}={v}" for k, v in params.items()) + ")")
        say(f"data: {data.path}: train {len(data.train)} sentences / {n_train} tokens, test "
             f"{len(data.test)} / {n_test}")
    t0 = time.perf_counter()
    X_train, y_train = featurize(data.train, "chunking")
    X_test, y_test = featurize(data.test, "chunking")
    t_feat = time.perf_counter() - t0
    if not quiet:
        say(f"featurise: {t_feat:.2f} s")
    est = LinearChainCRF(**params)
    t0 = time.perf_counter()
    fit(est, X_train, y_train, log=not quiet, expect_max_iterations=params.get("max_iterations") is not None)
    t_train = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = est.predict(X_test)
    t_tag = time.perf_counter() - t0
    res = conlleval(y_test, pred)
    total = time.perf_counter() - t_start
    per_it = t_train / est.n_iter_ if est.n_iter_ else float("nan")
    say(f"chunk F1 (conlleval): {res.f1:.4f}  (precision {res.precision:.4f}, recall {res.recall:.4f})")
    say(f"token accuracy: {res.accuracy:.4f}")
    say(f"iterations: {est.n_iter_} ({'converged' if est.converged_ else 'not converged'}), "
         f"{per_it:.3f} s/iteration; features: {est.num_features_}")
    say(f"time: featurise {t_feat:.2f} s, train {t_train:.2f} s, tag {t_tag:.2f} s, total {total:.2f} s")
    if args.verbose:
        say()
        say(res.report())
    return 0
