"""A BiLSTM-CRF chunker on CoNLL-2000 with ``structlearn.torch.CRF``, and the same with pytorch-crf.

Data: ``conll2000`` (``structlearn.datasets.load_conll2000``; ``../shared/data`` or ``--data-home``):
the first ``--train`` training sentences and the first ``--test`` test sentences (IOB2 chunk tags,
K = 23). Model: word embeddings (lower-cased, words seen once map to UNK with probability ½ in
training) + POS-tag embeddings -> one bidirectional LSTM layer -> a linear layer (emission scores)
-> a CRF layer, trained by Adam on the summed negative log-likelihood, mini-batches of 32 sentences
padded with a prefix mask. The CRF layer is one of

* ``structlearn``: ``structlearn.torch.CRF(K, batch_first=True)`` (CPU: the Numba engine);
* ``structlearn+BIO``: the same with ``constraints=bio_constraints(tags)`` (``I-X`` only after
  ``B-X``/``I-X``; forbidden transitions are -inf in training and decoding);
* ``pytorch-crf``: ``torchcrf.CRF(K, batch_first=True)`` (skipped if not installed).

All start from the same encoder weights and CRF initialisation (pytorch-crf's parameters are copied
from structlearn's layer), so the first two rows differ only in the layer's arithmetic. Chunk F1 is
conlleval's (``structlearn.metrics.conlleval``) on the test subset.

Run::

    .venv/bin/python examples/torch_bilstm_crf.py [--train 2000] [--test 500] [--epochs 6] [--quick]
                                                  [--layers structlearn,structlearn+BIO,pytorch-crf]
                                                  [--figures DIR]

``--quick``: 300 / 100 sentences, 2 epochs (the smoke test in tests/torch runs it). ``--figures DIR``:
also save PNGs made with :mod:`structlearn.plotting` into DIR (created if missing; nothing is written
without the flag): ``bilstm_crf_training.png`` (training negative log-likelihood per token and epoch
of every layer) and ``bilstm_crf_transitions.png`` (the first layer's learnt transition scores).

Result (defaults: 2,000 / 500 sentences, 6 epochs, torch threads 1; 2 shared CPU cores under load from
other jobs; 4 min wall for the three rows; 2026-12-01)::

    structlearn      chunk F1 0.9110  token acc 0.9437  train 52.4 s (CRF forward 2.5 s)
    structlearn+BIO  chunk F1 0.9154  token acc 0.9447  train 80.5 s (CRF forward 3.2 s)
    pytorch-crf      chunk F1 0.9110  token acc 0.9437  train 97.0 s (CRF forward 10.8 s)

structlearn's layer and pytorch-crf's train the same model (same F1 to four decimals); the BiLSTM
dominates the training time ("CRF forward" is the layer's forward; structlearn's includes its
gradient, computed there by the engine). ``--quick`` takes ~10 s per row.
"""
import argparse
import copy
import os
import random
import time
from collections import Counter

# Numba's OpenMP runtime (the engine's kernels) next to torch's: with the default (spinning) wait
# policy torch's backward pass ran 40x slower on 2 cores (a BiLSTM step 50 ms -> 2 s). Passive waiting
# must be set before torch is imported; see structlearn.torch.set_num_threads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from structlearn.datasets import load_conll2000  # noqa: E402
from structlearn.metrics import conlleval  # noqa: E402
from structlearn.torch import CRF, bio_constraints  # noqa: E402


class Encoder(nn.Module):
    """Word + POS embeddings -> BiLSTM -> emission scores (batch, seq, K)."""

    def __init__(self, n_words, n_pos, n_tags, word_dim=50, pos_dim=16, hidden=64):
        super().__init__()
        self.words = nn.Embedding(n_words, word_dim, padding_idx=0)
        self.pos = nn.Embedding(n_pos, pos_dim, padding_idx=0)
        self.lstm = nn.LSTM(word_dim + pos_dim, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, n_tags)

    def forward(self, w, p, lengths):
        x = torch.cat([self.words(w), self.pos(p)], dim=-1)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=w.shape[1])
        return self.out(h)


def vocabularies(sents):
    wc = Counter(w.lower() for s in sents for w, _, _ in s)
    words = {"<pad>": 0, "<unk>": 1}
    for w in sorted(wc):
        words[w] = len(words)
    pos = {"<pad>": 0, "<unk>": 1}
    tags = {}
    for s in sents:
        for _, p, c in s:
            pos.setdefault(p, len(pos))
            tags.setdefault(c, len(tags))
    return words, pos, tags, wc


def batches(sents, words, pos, tags, batch_size, rng=None, wc=None):
    order = list(range(len(sents)))
    if rng is not None:
        rng.shuffle(order)
    for a in range(0, len(order), batch_size):
        chunk = [sents[i] for i in order[a:a + batch_size]]
        B, T = len(chunk), max(len(s) for s in chunk)
        w = torch.zeros(B, T, dtype=torch.long)
        p = torch.zeros(B, T, dtype=torch.long)
        y = torch.zeros(B, T, dtype=torch.long)
        for b, s in enumerate(chunk):
            for t, (word, ps, c) in enumerate(s):
                lw = word.lower()
                unk = rng is not None and wc[lw] == 1 and rng.random() < 0.5
                w[b, t] = 1 if unk else words.get(lw, 1)
                p[b, t] = pos.get(ps, 1)
                y[b, t] = tags.get(c, 0)
        lengths = torch.tensor([len(s) for s in chunk])
        yield w, p, y, lengths, torch.arange(T)[None] < lengths[:, None], chunk


def make_layer(kind, K, tag_names, template):
    if kind == "structlearn":
        layer = CRF(K, batch_first=True)
    elif kind == "structlearn+BIO":
        layer = CRF(K, batch_first=True, constraints=bio_constraints(tag_names))
    else:
        import torchcrf
        layer = torchcrf.CRF(K, batch_first=True)
    layer.load_state_dict(template.state_dict(), strict=False)
    return layer


def run(kind, data, args, enc_template, crf_template):
    train, test, words, pos, tags, wc = data
    names = [None] * len(tags)
    for t, i in tags.items():
        names[i] = t
    enc = copy.deepcopy(enc_template)
    layer = make_layer(kind, len(tags), names, crf_template)
    opt = torch.optim.Adam(list(enc.parameters()) + list(layer.parameters()), lr=args.lr)
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    crf_time = 0.0
    epoch_loss = []  # negative log-likelihood per training token, one value per epoch
    for _ in range(args.epochs):
        enc.train()
        total, n_tokens = 0.0, 0
        for w, p, y, lengths, mask, _ in batches(train, words, pos, tags, args.batch_size, rng, wc):
            opt.zero_grad()
            em = enc(w, p, lengths)
            tc = time.perf_counter()
            loss = -layer(em, y, mask=mask, reduction="sum")
            crf_time += time.perf_counter() - tc
            loss.backward()
            nn.utils.clip_grad_norm_(list(enc.parameters()) + list(layer.parameters()), 5.0)
            opt.step()
            total, n_tokens = total + float(loss.detach()), n_tokens + int(lengths.sum())
        epoch_loss.append(total / max(n_tokens, 1))
    train_s = time.perf_counter() - t0
    enc.eval()
    gold, pred = [], []
    t0 = time.perf_counter()
    with torch.no_grad():
        for w, p, y, lengths, mask, chunk in batches(test, words, pos, tags, 64):
            paths = layer.decode(enc(w, p, lengths), mask=mask)
            for s, path in zip(chunk, paths):
                gold.append([c for _, _, c in s])
                pred.append([names[i] for i in path])
    res = conlleval(gold, pred)
    return {"layer": kind, "f1": res.f1, "accuracy": res.accuracy, "train_s": train_s,
            "crf_s": crf_time,   # the layer's forward only (its backward runs inside loss.backward())
            "decode_s": time.perf_counter() - t0, "epoch_loss": epoch_loss,
            "transitions": layer.transitions.detach().cpu().numpy().copy(), "tag_names": names}


def save_figures(results, directory):
    """The structlearn.plotting figures (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    figs = {"training": plotting.plot_training({r["layer"]: r["epoch_loss"] for r in results},
                                               key="NLL per token",
                                               title="BiLSTM-CRF: training loss per epoch"),
            "transitions": plotting.plot_transitions(results[0]["transitions"], fmt=".1f",
                                                     state_names=results[0]["tag_names"],
                                                     title=f"CRF transition scores ({results[0]['layer']})")}
    for name, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, 'bilstm_crf_' + name)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--test", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", default="structlearn,structlearn+BIO,pytorch-crf")
    ap.add_argument("--quick", action="store_true", help="300 / 100 sentences, 2 epochs")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    args = ap.parse_args(argv)
    if args.quick:
        args.train, args.test, args.epochs = 300, 100, 2
    torch.set_num_threads(args.threads)
    data = load_conll2000(data_home=args.data_home, download_if_missing=False)
    train, test = data.train[:args.train], data.test[:args.test]
    words, pos, tags, wc = vocabularies(train)
    for s in test:                      # test-only chunk tags (rare types) get an index too
        for _, _, c in s:
            tags.setdefault(c, len(tags))
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    enc = Encoder(len(words), len(pos), len(tags))
    crf = CRF(len(tags), batch_first=True)
    kinds = args.layers.split(",")
    if "pytorch-crf" in kinds:
        try:
            import torchcrf  # noqa: F401
        except ImportError:
            print("pytorch-crf is not installed (pip install pytorch-crf): its row is skipped")
            kinds.remove("pytorch-crf")
    print(f"CoNLL-2000 subset: {len(train)} train / {len(test)} test sentences, K = {len(tags)} tags, "
          f"{args.epochs} epochs, torch threads {args.threads}")
    results = []
    for kind in kinds:
        r = run(kind, (train, test, words, pos, tags, wc), args, enc, crf)
        results.append(r)
        print(f"{r['layer']:<16} chunk F1 {r['f1']:.4f}  token acc {r['accuracy']:.4f}  "
              f"train {r['train_s']:.1f} s "
              f"(CRF forward {r['crf_s']:.1f} s)  decode {r['decode_s']:.2f} s", flush=True)
    if args.figures and results:
        save_figures(results, args.figures)
    return results


if __name__ == "__main__":
    main()
