"""Options and results of :class:`~structlearn.engine.structures.FactorGraph` inference (libDAI style: one small
record of options with named presets, one result record for every method)."""
import dataclasses
from dataclasses import dataclass

import numpy as np

from ..kernels.messages import SCHEDULES
from ._base import Marginals

METHODS = ("bp", "trw", "mf", "exact")


@dataclass(frozen=True)
class BPOptions:
    """Options of the message-passing engine (BP, TRW-BP) and of mean field.

    Parameters
    ----------
    max_iter : int
        Largest number of iterations (one iteration updates every factor's messages once; mean field:
        one sweep over the variables).
    tol : float
        Converged when an iteration changes no message (mean field: no q_i(x_i)) by ``tol`` or more
        (max |Δm| in linear space, messages normalised to sum 1).
    damping : float in [0, 1)
        Geometric damping, ``log m ← (1 − damping) log m_new + damping log m_old`` (BP, TRW).
    schedule : {"sequential", "parallel", "residual"}
        ``"sequential"``: factors leaves-to-root in a breadth-first order of the factor graph, then back,
        each using the newest messages (one iteration is exact on a forest); ``"parallel"``
        (flooding): all from the previous iteration's messages; ``"residual"``: residual BP (Elidan,
        McGraw & Koller 2006), always the factor whose update changes a message most, O(log F)
        bookkeeping per update; ``max_iter`` counts F updates.
    rho : None, "uniform", "sample" or array-like of float, shape (E,) / (F,)
        TRW factor appearance weights in (0, 1]. ``"uniform"``: the edge appearance probabilities of the
        uniform distribution over spanning trees (effective resistances; factors of arity ≤ 2 only);
        ``"sample"``: the frequencies of the factors in ``n_trees`` random maximal hyperforests;
        None: ``"uniform"`` when every factor has arity ≤ 2, else ``"sample"``. Ignored by ``"bp"``.
    n_trees : int
        Random hyperforests drawn for ``rho="sample"``.
    random_state : int, RandomState or Generator
        Seed of ``rho="sample"`` (default 0: reproducible).
    warn : bool
        Emit a ``ConvergenceWarning`` when a graph does not converge.

    Notes
    -----
    Presets (``BPOptions.preset(name, **changes)``): ``"bp"`` sequential, no damping;
    ``"bp_parallel"`` flooding with damping 0.5; ``"trw"`` sequential with damping 0.3;
    ``"residual"`` residual BP; ``"fast"`` tol 1e-6, max_iter 50; ``"mf"`` tol 1e-10, max_iter 1000.
    """

    max_iter: int = 500
    tol: float = 1e-10
    damping: float = 0.0
    schedule: str = "sequential"
    rho: object = None
    n_trees: int = 100
    random_state: object = 0
    warn: bool = True

    @classmethod
    def preset(cls, name, **changes):
        """Named preset with fields replaced by ``changes``; ValueError for an unknown name."""
        if name not in PRESETS:
            raise ValueError(f"unknown BPOptions preset {name!r}; expected one of {sorted(PRESETS)}")
        return dataclasses.replace(PRESETS[name], **changes)

    @classmethod
    def resolve(cls, method, options, name="options"):
        """The options learning uses for ``method`` from None / a preset name / a dict of fields / a
        BPOptions; None for ``"exact"``.

        None gives ``preset(method, tol=1e-5, max_iter=200, warn=False)``; a name or a dict of fields
        gives that preset (the dict: ``method``'s preset with the fields replaced) with ``warn=False``
        unless the dict sets it. ``name`` is the argument named in error messages (``inference_options``
        for the estimators).
        """
        if options is not None and not isinstance(options, (str, dict, BPOptions)):
            raise ValueError(f"`{name}` must be None, a preset name, a dict of BPOptions fields or a "
                             f"BPOptions; got {type(options).__name__}")
        if method == "exact":
            return None
        if options is None:
            return cls.preset(method, tol=1e-5, max_iter=200, warn=False)
        if isinstance(options, str):
            return cls.preset(options, warn=False)
        if isinstance(options, dict):
            fields = [f.name for f in dataclasses.fields(BPOptions)]
            unknown = sorted(str(k) for k in options if k not in fields)
            if unknown:
                raise ValueError(f"`{name}` has unknown BPOptions field(s) {unknown}; known: {fields}")
            return cls.preset(method, **{"warn": False, **options})
        return options

    def _checked(self):
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"`max_iter` must be a positive integer; got {self.max_iter!r}")
        if not (np.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"`tol` must be a non-negative number; got {self.tol!r}")
        if not (0.0 <= self.damping < 1.0):
            raise ValueError(f"`damping` must lie in [0, 1); got {self.damping!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"`schedule` must be one of {sorted(SCHEDULES)}; got {self.schedule!r}")
        if not isinstance(self.n_trees, (int, np.integer)) or self.n_trees < 1:
            raise ValueError(f"`n_trees` must be a positive integer; got {self.n_trees!r}")
        return self


PRESETS = {
    "bp": BPOptions(),
    "bp_parallel": BPOptions(schedule="parallel", damping=0.5),
    "trw": BPOptions(damping=0.3),
    "residual": BPOptions(schedule="residual"),
    "fast": BPOptions(tol=1e-6, max_iter=50),
    "mf": BPOptions(max_iter=1000),
}


@dataclass
class GraphInference:
    """Result of :meth:`FactorGraph.infer`: log Z (or the MAP score), marginals and MAP of one call.

    Attributes
    ----------
    log_z : ndarray of float64, shape (B,)
        Sum-product: exact log Z (``"exact"``), the Bethe estimate (``"bp"``), the TRW upper bound
        (``"trw"``, at convergence) or the mean-field lower bound (``"mf"``). Max-product: the score
        of ``labels`` (the exact maximum for ``"exact"``; a lower bound on it otherwise). -inf when
        infeasible.
    unary : ndarray of float64, shape (N, K)
        Variable (pseudo-)marginals P(x_n = k), linear space, 0 on padded labels; max-product:
        max-marginals max_{x: x_n = k} p(x) normalised to sum 1 over k. All 0 for a graph whose
        ``log_z`` is -inf.
    edge : ndarray of float64, shape (E, K, K) or None
        Pairwise graphs (built from ``edges``): edge (max-)marginals, ``edge[e, i, j]`` for
        ``x_u = i, x_v = j`` where ``edges[e] = (u, v)``; None for graphs built by ``from_factors``.
    labels : ndarray of int64, shape (N,) or None
        MAP decoding (max-product; mean field: the argmax of every q_n); None for sum-product.
    converged : ndarray of bool, shape (B,)
    n_iter : ndarray of int64, shape (B,)
    max_residual : ndarray of float64, shape (B,)
        Largest change of the last iteration (0 for exact inference).
    messages : ndarray of float64, shape (P, K) or None
        Final factor→variable log-messages (pairwise graphs: ``2e`` is u → v, ``2e + 1`` is v → u);
        pass them as ``init`` to warm-start; mean field: the final q (N, K).
    method : str
    factor_beliefs : ndarray of float64, shape (Σ_f |table_f|,)
        Factor (max-)marginals, linear space, factor f's in C order over its scope at
        ``factor_offsets[f]:factor_offsets[f + 1]`` (mean field: the product of the q's).
    factor_offsets : ndarray of int64, shape (F + 1,)
    factor_shapes : list of tuple
    bound : {"exact", "upper", "lower", "none"}
        What ``log_z`` is for sum-product: exact, an upper bound (TRW at convergence), a lower bound
        (mean field), or an estimate (BP).
    semiring : {"log", "max"}
    """

    log_z: np.ndarray
    unary: np.ndarray
    edge: object
    labels: object
    converged: np.ndarray
    n_iter: np.ndarray
    max_residual: np.ndarray
    messages: object
    method: str
    factor_beliefs: np.ndarray = None
    factor_offsets: np.ndarray = None
    factor_shapes: list = None
    bound: str = "none"
    semiring: str = "log"

    @property
    def marginals(self):
        """``Marginals(unary, edge)``."""
        return Marginals(self.unary, self.edge)

    def factor(self, f):
        """(Max-)marginal table of factor f, shape its scope's cardinalities (linear space)."""
        o = self.factor_offsets
        return self.factor_beliefs[o[f]:o[f + 1]].reshape(self.factor_shapes[f])

    @property
    def factors(self):
        """Every factor's (max-)marginal table (list of F arrays)."""
        return [self.factor(f) for f in range(len(self.factor_shapes))]
