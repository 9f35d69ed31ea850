"""Hard constraints on chains: allowed transitions, first and last labels (BIO / BIOES helpers)."""
from collections import namedtuple

import numpy as np
import torch

from ..crf.linear_chain import bio_forbidden

#: Allowed-label masks of a chain (True = allowed): ``transitions`` (K, K) "from, to", ``start`` (K,)
#: (first label), ``end`` (K,) (last label). Forbidden entries become -inf potentials.
Constraints = namedtuple("Constraints", ["transitions", "start", "end"])


def _split(label):
    s = str(label)
    if s in ("O", "o"):
        return "O", None
    if len(s) > 2 and s[1] in "-_" and s[0].upper() in "BIES":
        return s[0].upper(), s[2:]
    raise ValueError(f"label {label!r} is not O or <B|I|E|S>-TYPE; cannot derive BIO/BIOES constraints")


def bio_constraints(labels, scheme="BIO"):
    """Constraints of a chunk tagging scheme.

    Parameters
    ----------
    labels : sequence of str, length K
        Label names in tag-index order, e.g. ``["O", "B-NP", "I-NP"]``.
    scheme : {"BIO", "IOB2", "BIOES", "IOBES"}
        ``"BIO"`` (= IOB2): ``I-X`` only after ``B-X`` or ``I-X`` and never first (the rule of
        :func:`structlearn.crf.linear_chain.bio_forbidden`). ``"BIOES"``: after ``B-X``/``I-X`` only
        ``I-X``/``E-X``; elsewhere (and first) only ``O``, ``B-*``, ``S-*``; last only ``O``,
        ``E-*``, ``S-*``.

    Returns
    -------
    Constraints
        Boolean tensors ``transitions`` (K, K), ``start`` (K,), ``end`` (K,), True = allowed.

    Raises
    ------
    ValueError
        An unknown scheme, or a label that is not ``O`` or ``B-``/``I-`` (``E-``/``S-``) + type.
    """
    labels = list(labels)
    K = len(labels)
    s = scheme.upper()
    if s in ("BIO", "IOB2"):
        for lab in labels:
            if _split(lab)[0] not in "OBI":
                raise ValueError(f"label {lab!r} is not O, B-X or I-X (scheme {scheme!r})")
        forb, fstart = bio_forbidden(labels)
        return Constraints(torch.from_numpy(~forb), torch.from_numpy(~fstart), torch.ones(K, dtype=torch.bool))
    if s not in ("BIOES", "IOBES"):
        raise ValueError(f"`scheme` must be 'BIO', 'IOB2', 'BIOES' or 'IOBES'; got {scheme!r}")
    parts = [_split(lab) for lab in labels]
    trans = np.zeros((K, K), dtype=bool)
    start = np.zeros(K, dtype=bool)
    end = np.zeros(K, dtype=bool)
    for j, (pj, tj) in enumerate(parts):
        start[j] = pj in ("O", "B", "S")
        end[j] = pj in ("O", "E", "S")
        for i, (pi, ti) in enumerate(parts):
            if pi in ("B", "I"):
                trans[i, j] = pj in ("I", "E") and tj == ti
            else:
                trans[i, j] = pj in ("O", "B", "S")
    return Constraints(torch.from_numpy(trans), torch.from_numpy(start), torch.from_numpy(end))


def check_constraints(constraints, K):
    """``constraints`` (None, a :data:`Constraints`, or a (K, K) boolean allowed-transition mask) as
    a :data:`Constraints` of boolean tensors, or None."""
    if constraints is None:
        return None
    if isinstance(constraints, torch.Tensor) or isinstance(constraints, np.ndarray):
        constraints = Constraints(constraints, None, None)
    if not isinstance(constraints, tuple) or len(constraints) != 3:
        raise ValueError("`constraints` must be None, a (K, K) boolean mask of allowed transitions or a "
                         f"Constraints(transitions, start, end); got {type(constraints).__name__}")
    out = []
    for x, name, shape in zip(constraints, ("transitions", "start", "end"), ((K, K), (K,), (K,))):
        if x is None:
            out.append(torch.ones(shape, dtype=torch.bool))
            continue
        x = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
        if x.dtype != torch.bool or tuple(x.shape) != shape:
            raise ValueError(f"`constraints.{name}` must be a boolean tensor of shape {shape} (True = "
                             f"allowed); got {x.dtype} {tuple(x.shape)}")
        out.append(x)
    return Constraints(*out)


def apply_constraints(constraints, transition, start, end):
    """(transition, start, end) with forbidden entries set to -inf (differentiable elsewhere)."""
    if constraints is None:
        return transition, start, end
    neg = float("-inf")

    def mask(x, allowed):
        allowed = allowed.to(x.device)
        return torch.where(allowed, x, torch.full_like(x, neg))

    return (mask(transition, constraints.transitions), mask(start, constraints.start),
            mask(end, constraints.end))
