"""Chinese word segmentation as a semi-Markov task: SemiMarkovCRF on UNER GSDSIMP (and PKU gold).

Characters are the tokens, words the segments (one label "W", consecutive words allowed). Character
attributes: unigrams c[-2..2], bigrams c[-2]c[-1], c[-1]c[0], c[0]c[1], c[1]c[2], c[-1]c[1], and the
character-type trigram; segment features: first/last character attributes and the whole-span string
(words seen in training). Trains on GSDSIMP train (full), reports word precision/recall/F1 on
GSDSIMP test and on the SIGHAN 2005 PKU test gold (a different segmentation standard).

    python examples/cws_gsdsimp.py [--c2 0.3] [--max-iterations N] [--data-home DIR] [--quick]
                                   [--figures DIR]

``--quick``: train on the first 1,000 GSDSIMP sentences, at most 60 L-BFGS iterations (seconds).
``--figures DIR``: also save ``cws_training.png`` (the L-BFGS objective per iteration, made with
:mod:`structlearn.plotting`) into DIR (created if missing; nothing is written without the flag).

Data: ``uner_chinese_gsdsimp`` and ``sighan2005_cws`` under ``$STRUCTLEARN_DATA`` or ``../shared/data``.
"""
import argparse
import gzip
import time
import warnings

from sklearn.exceptions import ConvergenceWarning

from structlearn import SemiMarkovCRF
from structlearn.datasets import get_data_path


def load_gsdsimp(split, data_home=None):
    """[(characters, words as (start, end exclusive, "W") segments)] of a UNER GSDSIMP split."""
    root = get_data_path("uner_chinese_gsdsimp", data_home)
    if root is None:
        raise FileNotFoundError("data set 'uner_chinese_gsdsimp' not found (set STRUCTLEARN_DATA)")
    out, words = [], []
    with gzip.open(root / f"zh_gsdsimp-ud-{split}.iob2.gz", "rt", encoding="utf-8") as fh:
        for line in list(fh) + ["\n"]:
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue
            if not line.strip():
                if words:
                    out.append(_segmented(words))
                    words = []
                continue
            words.append(line.split("\t")[1])
    return out


def load_pku_gold(data_home=None):
    """[(characters, word segments)] of the SIGHAN 2005 PKU test gold (words separated by spaces)."""
    root = get_data_path("sighan2005_cws", data_home)
    if root is None:
        return None
    paths = sorted(p for p in root.rglob("*") if p.is_file() and "pku" in p.name.lower()
                   and "gold" in p.name.lower() and "test" in p.name.lower())
    if not paths:
        return None
    opener = gzip.open if paths[0].suffix == ".gz" else open
    with opener(paths[0], "rt", encoding="utf-8") as fh:
        return [_segmented(line.split()) for line in fh if line.split()]


def _segmented(words):
    chars, segs, t = [], [], 0
    for w in words:
        chars.extend(w)
        segs.append((t, t + len(w), "W"))
        t += len(w)
    return chars, segs


def _ctype(ch):
    if ch.isdigit():
        return "D"
    if ch.isascii() and ch.isalpha():
        return "L"
    if not ch.isalnum():
        return "P"
    return "H"


def cws_items(chars, wide_bigrams=False):
    """Character attributes of one sentence (see the module docstring); ``wide_bigrams`` adds
    c[-2]c[-1] and c[1]c[2]."""
    pad = ["<s>", "<s>"] + list(chars) + ["</s>", "</s>"]
    items = []
    for i in range(len(chars)):
        j = i + 2
        item = {"c": pad[j], "c-1": pad[j - 1], "c+1": pad[j + 1], "c-2": pad[j - 2],
                "c+2": pad[j + 2], "c-1c0": pad[j - 1] + pad[j], "c0c+1": pad[j] + pad[j + 1],
                "c-1c+1": pad[j - 1] + pad[j + 1],
                "t": _ctype(pad[j - 1][0]) + _ctype(pad[j][0]) + _ctype(pad[j + 1][0])}
        if wide_bigrams:
            item["c-2c-1"] = pad[j - 2] + pad[j - 1]
            item["c+1c+2"] = pad[j + 1] + pad[j + 2]
        items.append(item)
    return items


def word_prf(gold, pred):
    """Word precision, recall, F1 over sentences of (start, end, label) segments."""
    tp = n_gold = n_pred = 0
    for g, p in zip(gold, pred):
        gs = {(s, e) for s, e, _ in g}
        ps = {(s, e) for s, e, _ in p}
        tp += len(gs & ps)
        n_gold += len(gs)
        n_pred += len(ps)
    prec = tp / n_pred if n_pred else 0.0
    rec = tp / n_gold if n_gold else 0.0
    return prec, rec, 2 * prec * rec / (prec + rec) if prec + rec else 0.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--c2", type=float, default=0.3)
    ap.add_argument("--max-iterations", type=int, default=None)
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--quick", action="store_true", help="1,000 training sentences, <= 60 iterations")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    args = ap.parse_args(argv)
    train, test = load_gsdsimp("train", args.data_home), load_gsdsimp("test", args.data_home)
    if args.quick:
        train = train[:1000]
        args.max_iterations = args.max_iterations or 60
    t0 = time.perf_counter()
    est = SemiMarkovCRF(allow_same_label=True, c2=args.c2, max_iterations=args.max_iterations,
                        token_attribute="c", segment_features=("first", "last", "span"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit([cws_items(c, True) for c, _ in train], [s for _, s in train])
    print(f"GSDSIMP train: {len(train)} sentences, {est.n_iter_} L-BFGS iterations, "
          f"{time.perf_counter() - t0:.1f} s")
    sets = [("GSDSIMP test", test), ("PKU test gold", load_pku_gold(args.data_home))]
    for name, data in sets:
        if data is None:
            print(f"{name}: data not found")
            continue
        pred = est.predict_segments([cws_items(c, True) for c, _ in data])
        p, r, f = word_prf([s for _, s in data], pred)
        print(f"{name}: {len(data)} sentences, word P {p:.4f} R {r:.4f} F1 {f:.4f}")
    if args.figures:
        import matplotlib
        matplotlib.use("Agg")
        from structlearn import plotting

        ax = plotting.plot_training(est, title=f"SemiMarkovCRF on GSDSIMP ({len(train)} sentences): "
                                               f"L-BFGS objective")
        print(f"figure saved to {plotting.save_figure(ax, args.figures, 'cws_training')}")


if __name__ == "__main__":
    main()
