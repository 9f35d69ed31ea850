r"""The super-label semi-Markov structure: segmentations into (state, duration) labels with one duration
per label and a transition stage that may go through the states (the general hidden semi-Markov model
and its special cases, Yu 2010 §2.1, §3.2, §3.3)."""
import numpy as np

from ..kernels import semimarkov_super as _k
from ..kernels import semimarkov_super_decode as _kd
from ...utils.validation import check_allowed_mask, check_log_potentials
from ._base import Marginals, StructureBase
from .semimarkov import BackwardMessages, ForwardMessages, SemiMarkov

#: Largest |log-potential| the linear-space passes exponentiate without an offset (exp(±700) is inside the
#: float64 range): structures whose largest start, end or transition potential lies outside run every LOG
#: query through the generic path.
_LINEAR_MAX = 700.0


def super_label_tables(M, D, Dc, open_end):
    """(middle, first, last, single) log duration tables (Dc, M·D) of the super-labels on the generic
    :class:`~structlearn.engine.structures.SemiMarkov`: label k = j·D + d - 1 takes exactly duration d (0 there,
    -inf elsewhere); with ``open_end`` a last (or only) segment of observed length l may carry any label
    with d >= l."""
    ell = np.arange(1, Dc + 1)[:, None]
    d = np.tile(np.arange(1, D + 1), M)[None, :]
    exact = np.where(ell == d, 0.0, -np.inf)
    if not open_end:
        return exact, exact, exact, exact
    open_ = np.where(ell <= d, 0.0, -np.inf)
    return exact, exact, open_, open_


def _lin(x):
    """(exp(x - max), max) of a log array (max of the finite entries, 0 when there are none)."""
    fin = x[np.isfinite(x)]
    m = float(fin.max()) if fin.size else 0.0
    with np.errstate(under="ignore"):
        return np.exp(x - m), m


class SuperLabelSemiMarkov(StructureBase):
    r"""Distribution over segmentations into super-labels k = j·D + d - 1 = (state j, duration d).

    A segmentation of T tokens is a list of segments (s_i, e_i, k_i) tiling [0, T) where a k-segment
    lasts exactly d tokens — except, with ``open_end``, the last one, which may be cut after any observed
    length l <= d (right censoring, Yu 2010 §2.2.1). It scores

    .. math::

        s(y) = start[k_1] + \sum_i \sum_{u=s_i}^{e_i} unary[u, j_i] + \sum_{i<m} transition[k_i, k_{i+1}]
        + end[k_m]

    with a transition that is either a dense (K, K) log-matrix or *factored through the states*,
    transition[k, k'] = leave[k, j'] + enter[i, k'] (i the state of k, j' the state of k'). The general
    HSMM (Yu 2010 §2.1) is the dense case; the residential-time HMM (§3.3, a_i(j, d)) has only ``enter``;
    the variable-transition HMM (§3.2, a_ij(d') / (1 - a_ii(d')) · p_j(d)) has ``leave`` and an ``enter``
    that does not depend on i. Each is exactly the generic :class:`SemiMarkov` on the same super-labels
    (:meth:`generic`), at a lower cost.

    Parameters
    ----------
    unary : array-like of float64, shape (N, M)
        Per-state log-potentials (the emission log-densities); -inf forbids a state at a token.
    n_durations : int
        D >= 1; K = M·D labels.
    transition : array-like of float64, shape (K, K), optional
        Dense log-potentials "from, to". Exclusive with ``leave`` / ``enter``.
    leave : array-like of float64, shape (K, M), optional
        leave[k, j']: leaving label k towards state j' (default 0).
    enter : array-like of float64, shape (M, K) or (K,), optional
        enter[i, k']: entering label k' from state i; a (K,) vector is the same for every i (default 0).
    start, end : array-like of float64, shape (K,), optional
        Log-potentials of the first / last label; default 0.
    lengths : array-like of int, shape (B,), optional
        Lengths of the packed sequences; default one sequence of N tokens.
    open_end : bool, default False
        Whether the last segment may be cut (it then scores like a whole one).

    Raises
    ------
    ValueError
        Shapes that disagree, NaN or +inf potentials, a bad ``n_durations``, or both a dense and a
        factored transition.

    Notes
    -----
    Sum-product runs in linear space with per-token normalisers and per-state segment factors
    (:mod:`structlearn.engine.kernels.semimarkov_super`): a token costs O(K) plus the transition stage, O(M·K)
    factored (O(T·M²·D) per sequence, Yu 2010 §3.2–3.3) or O(K²) dense (O(T·M²·D²), §2.1); memory O(N·K).
    :meth:`log_partition` is the forward alone. The posteriors (:meth:`marginals`, :meth:`posterior_counts`,
    :meth:`forward`, :meth:`backward`) check their consistency (Σ_j γ_t(j) = 1 within 1e-9 at every t);
    a batch that fails, has a sequence the forward finds infeasible, or has log-potentials above 700,
    is answered by the exact log-space generic structure instead (O(N·K²)). Viterbi (:meth:`max`, :meth:`argmax`) runs in log space, exactly.
    Other queries (durations, entropy, k-best, sampling, scores) are the generic structure's.
    """

    def __init__(self, unary, n_durations, *, transition=None, leave=None, enter=None, start=None,
                 end=None, lengths=None, open_end=False):
        unary = check_log_potentials(unary, "unary", ndim=2)
        N, M = unary.shape
        if isinstance(n_durations, bool) or not isinstance(n_durations, (int, np.integer)) \
                or n_durations < 1:
            raise ValueError(f"`n_durations` must be an integer >= 1; got {n_durations!r}")
        D = int(n_durations)
        K = M * D
        self._init_batch(N, K, lengths)
        self.state_unary = unary
        self.n_states, self.n_durations = M, D
        self.open_end = bool(open_end)
        self.start = np.zeros(K) if start is None else check_log_potentials(start, "start", (K,))
        self.end = np.zeros(K) if end is None else check_log_potentials(end, "end", (K,))
        if transition is not None:
            if leave is not None or enter is not None:
                raise ValueError("give either a dense `transition` or the factored `leave` / `enter`, "
                                 "not both")
            self.dense_transition = check_log_potentials(transition, "transition", (K, K))
            self.leave = self.enter = None
        else:
            self.dense_transition = None
            self.leave = None if leave is None else check_log_potentials(leave, "leave", (K, M))
            if enter is None:
                self.enter = None
            else:
                enter = np.asarray(enter, dtype=np.float64)
                self.enter = check_log_potentials(enter, "enter", (K,) if enter.ndim == 1 else (M, K))
        self._cache = {}

    # -- derived -----------------------------------------------------------------------------------
    @property
    def states(self):
        """State of every label, int64 (K,)."""
        return np.repeat(np.arange(self.n_states), self.n_durations)

    @property
    def transition(self):
        """The dense (K, K) log transition (factored: leave[k, j'] + enter[i, k'])."""
        if "transition" not in self._cache:
            if self.dense_transition is not None:
                t = self.dense_transition
            else:
                K, st = self.n_labels, self.states
                t = np.zeros((K, K))
                if self.leave is not None:
                    t = t + self.leave[:, st]
                if self.enter is not None:
                    t = t + (self.enter[None, :] if self.enter.ndim == 1 else self.enter[st, :])
            self._cache["transition"] = t
        return self._cache["transition"]

    @property
    def _trans(self):
        return self.transition

    @property
    def unary(self):
        """The (N, K) per-label unaries of the generic structure (each state's column repeated D times)."""
        return self.generic().unary

    @property
    def max_duration(self):
        return self.generic().max_duration

    def generic(self):
        """The same distribution as a generic :class:`SemiMarkov` over the K super-labels (duration
        tables that allow one duration per label, :func:`super_label_tables`); exact in log space,
        time O(N·(D·K + K²))."""
        if "generic" not in self._cache:
            M, D = self.n_states, self.n_durations
            Dc = max(1, min(D, int(self.lengths.max()) if self.lengths.size else 1))
            middle, first, last, single = super_label_tables(M, D, Dc, self.open_end)
            self._cache["generic"] = SemiMarkov(
                np.repeat(self.state_unary, D, axis=1), middle, self.transition, lengths=self.lengths,
                start=self.start, end=self.end, allow_same_label=True, first_duration=first,
                last_duration=last, single_duration=single)
        return self._cache["generic"]

    def _spec(self):
        """Linear-space kernel arguments (mode, E, Et, At, has_a, Bf, b_vec, kap) and whether the
        linear passes apply (every potential below _LINEAR_MAX)."""
        if "spec" not in self._cache:
            K = self.n_labels
            one = np.ones((1, 1))
            if self.dense_transition is not None:
                E, tmax = _lin(self.dense_transition)
                kap = float(np.exp(min(tmax, _LINEAR_MAX)))
                spec = (_k.DENSE, E, np.ascontiguousarray(E.T), one, False, one, False, kap)
                big = tmax
            else:
                has_a = self.leave is not None
                At, amax = _lin(np.ascontiguousarray(self.leave.T)) if has_a else (one, 0.0)
                if self.enter is None:
                    Bf, bmax, b_vec = np.ones((1, K)), 0.0, True
                else:
                    b_vec = self.enter.ndim == 1
                    Bf, bmax = _lin(self.enter.reshape(1, K) if b_vec else self.enter)
                spec = (_k.FACTORED, one, one, np.ascontiguousarray(At), has_a, np.ascontiguousarray(Bf),
                        b_vec, float(np.exp(min(amax + bmax, _LINEAR_MAX))))
                big = amax + bmax
            def in_range(x):  # the largest finite entry, exponentiated without an offset
                fin = x[np.isfinite(x)]
                return fin.size == 0 or abs(float(fin.max())) < _LINEAR_MAX
            ok = abs(big) < _LINEAR_MAX and in_range(self.start) and in_range(self.end)
            self._cache["spec"] = (spec, ok)
        return self._cache["spec"]

    # -- LOG semiring --------------------------------------------------------------------------------
    def _forward_fast(self, store=False):
        """The linear-space forward (cached; ``store``: with the α̃ / α̃* rows): (astar, alpha, inc, log_z,
        z_fin, mid, alpha_last, ok)."""
        spec = self._spec()[0]
        if spec[0] == _k.DENSE:
            store = True
        if ("fwd", True) in self._cache:
            return self._cache[("fwd", True)]
        if ("fwd", store) not in self._cache:
            mode, E, _, At, has_a, Bf, b_vec, kap = spec
            out = _k.super_forward(self.state_unary, self.n_durations, self.start, self.end, self.open_end,
                                   mode, E, At, has_a, Bf, b_vec, kap, self.offsets, store)
            # a failed normaliser, or a sequence found infeasible (which the exact path confirms or
            # corrects: the linear passes must never turn a tiny likelihood into a zero one)
            if not out[7].all() or np.isneginf(out[3][self.lengths > 0]).any():
                self._cache["use_generic"] = True
            self._cache[("fwd", store)] = out
        return self._cache[("fwd", store)]

    def _fast(self):
        """Whether the LOG queries run in linear space (else the generic structure answers them)."""
        return self._spec()[1] and not self._cache.get("use_generic")

    def _posterior(self, enter=False, leave=False, dense=False, store=False):
        """The fast backward with the requested statistics (cached per request), or None when the
        batch is answered by the generic structure (potentials too large, or a failed check). Item 1
        (segments) and item 4 (leave, (B, K, M), the expected transitions from label k into state j')
        are completed here."""
        if not self._fast():
            return None
        spec = self._spec()[0]
        mode, _, Et, At, has_a, Bf, b_vec, kap = spec
        factored = mode == _k.FACTORED
        enter = factored and (enter or not b_vec)  # a full B: the segment counts come from enter
        leave = factored and (leave or b_vec)  # B the same for every i: they come from leave
        key = ("post", enter, leave, dense, store)
        if key not in self._cache:
            fwd = self._forward_fast(store=dense)
            if not self._fast():
                return None
            astar, alpha, inc, _, z_fin, mid, alpha_last, _ = fwd
            out = list(_k.super_posterior(self.state_unary, self.n_durations, self.start, self.end,
                                          self.open_end, mode, Et, At, has_a, Bf, b_vec, kap, self.offsets,
                                          astar, alpha, inc, mid, z_fin, enter, leave, dense, store))
            if not out[0].all():
                self._cache["use_generic"] = True
                return None
            if factored and leave:
                Af = At if has_a else np.ones((self.n_states, self.n_labels))
                bvec = Bf[0] if b_vec else np.zeros(self.n_labels)
                lv = (out[4] * bvec[None, None, :] + out[10]) * Af[None] * kap  # (B, M, K): [b, j', k]
                out[4] = np.ascontiguousarray(lv.transpose(0, 2, 1))
            if factored and not b_vec:  # segments = first + kap · Σ_i B̃[i, k] · enter[i, k]
                out[1] = out[2] + (out[3] * Bf[None]).sum(axis=1) * kap
            elif factored:  # segments = Σ_j' leave[k, j'] + P(k is the last label)
                with np.errstate(under="ignore"):
                    last = alpha_last * np.exp(self.end[None, :] - z_fin[:, None])
                last[~np.isfinite(z_fin)] = 0.0
                out[1] = out[4].sum(axis=2) + last
            self._cache[key] = out
        return self._cache[key]

    def log_partition(self):
        """Log partition function of every sequence, float64 (B,): -inf if infeasible, 0 if empty.

        The linear-space forward alone (time O(N·(K + M·K)) factored, O(N·K²) dense); once a posterior
        query found the batch inconsistent (see the class notes), the generic structure's value.
        """
        if self._fast():
            log_z = self._forward_fast()[3]
            if self._fast():
                return log_z.copy()
        return self.generic().log_partition()

    def posterior_counts(self, enter=False, leave=False, dense=False):
        """Expected counts of the posterior, summed over the sequences (the E-step of Yu 2010 §2.3.1).

        Parameters
        ----------
        enter, leave, dense : bool
            Which transition counts to compute.

        Returns
        -------
        dict of float64 arrays
            ``first`` (K,) P(the first segment has label k), ``segments`` (K,) expected number of
            k-segments, ``gamma`` (N, M) γ_t(j) = P(token t lies in a j-segment) (Yu 2010 eq. (8)),
            and as requested ``enter`` (M, K) expected transitions from state i into label k',
            ``leave`` (K, M) from label k into state j', ``dense`` (K, K) from k to k' (Σ_t ξ_t, eq. (7)).

        Notes
        -----
        Time O(N·(K + M·K)) for ``enter`` / ``leave`` of the factored transition they belong to, O(N·K²)
        for ``dense`` (and for every count of a dense transition).
        """
        spec = self._spec()[0]
        post = self._posterior(enter=enter, leave=leave, dense=dense)
        out = {}
        if post is None:
            g = self.generic()
            token, edge = g.marginals(edge="total")
            first_rows = self.offsets[:-1][self.lengths > 0]
            out["first"] = token[first_rows].sum(axis=0)
            out["segments"] = out["first"] + edge.sum(axis=0)
            out["gamma"] = token.reshape(-1, self.n_states, self.n_durations).sum(axis=2)
            trans = edge
        else:
            _, seg, first, cb, ca, cd, gamma = post[:7]
            out["first"], out["segments"], out["gamma"] = first.sum(axis=0), seg.sum(axis=0), gamma
            trans = None
            if spec[0] == _k.DENSE or dense:
                trans = cd.sum(axis=0) * self._dense_factor()
        M, D, st = self.n_states, self.n_durations, self.states
        if enter:
            if trans is not None:
                out["enter"] = np.stack([trans[st == i].sum(axis=0) for i in range(M)])
            else:
                Bf, kap = spec[5], spec[7]
                out["enter"] = cb.sum(axis=0) * (Bf if Bf.shape[0] == M else Bf[[0] * M]) * kap
        if leave:
            if trans is not None:
                out["leave"] = trans.reshape(self.n_labels, M, D).sum(axis=2)
            else:
                out["leave"] = ca.sum(axis=0)
        if dense:
            out["dense"] = trans
        return out

    def _dense_factor(self):
        """exp(transition) as the kernel's counts need it: E · kap (dense) or the factored product."""
        spec = self._spec()[0]
        if spec[0] == _k.DENSE:
            return spec[1] * spec[7]
        with np.errstate(under="ignore"):
            return np.exp(self.transition)

    def marginals(self, edge="full"):
        """Token and transition marginals over the K super-labels (as :meth:`SemiMarkov.marginals`).

        Parameters
        ----------
        edge : {"full", "sum", "total", "none"}
            ``"full"`` (N, K, K) row n = P(a boundary after token n with labels i, j); ``"sum"``
            (B, K, K) their sum per sequence; ``"total"`` (K, K) over the batch; ``"none"``: None.

        Returns
        -------
        Marginals
            ``unary`` (N, K) P(token n lies in a k-segment), ``edge`` as above. Time O(N·K) plus the
            edges: O(N·K²) (and memory O(N·K²) for ``"full"``).
        """
        if edge not in ("full", "sum", "total", "none"):
            raise ValueError(f"`edge` must be one of 'full', 'sum', 'total', 'none'; got {edge!r}")
        post = self._posterior(dense=edge in ("sum", "total"), store=True)
        if post is None:
            return self.generic().marginals(edge=edge)
        token = _k.super_token_marginals(post[7], self.n_durations, self.offsets)
        if edge == "none":
            return Marginals(token, None)
        if edge in ("sum", "total"):
            em = post[5] * self._dense_factor()[None]
            return Marginals(token, em.sum(axis=0) if edge == "total" else em)
        alpha = self._forward_fast(store=True)[1]
        bstart = post[8]
        nxt = np.zeros_like(bstart)
        nxt[:-1] = bstart[1:]
        nxt[self.offsets[1:][self.lengths > 0] - 1] = 0.0
        em = alpha[:, :, None] * self._dense_factor()[None] * nxt[:, None, :]
        return Marginals(token, em)

    def forward(self):
        """Normalised forward messages in log space (:data:`~structlearn.engine.structures.semimarkov.
        ForwardMessages`), from the linear-space pass (or the generic structure's, see the notes)."""
        post = self._posterior(store=True)
        if post is None:
            return self.generic().forward()
        astar, alpha, inc, log_z = self._forward_fast(store=True)[:4]
        with np.errstate(divide="ignore"):
            return ForwardMessages(np.log(alpha), np.log(astar), inc.copy(), log_z.copy())

    def backward(self):
        """Backward messages in log space, normalised with the forward's scales
        (:data:`~structlearn.engine.structures.semimarkov.BackwardMessages`)."""
        post = self._posterior(store=True)
        if post is None:
            return self.generic().backward()
        with np.errstate(divide="ignore"):
            return BackwardMessages(np.log(post[9]), np.log(post[8]))

    # -- MAX semiring --------------------------------------------------------------------------------
    def _viterbi_fast(self):
        if "viterbi" not in self._cache:
            one = np.zeros((1, 1))
            if self.dense_transition is not None:
                args = (_k.DENSE, self.dense_transition, one, False, one, False)
            else:
                has_a = self.leave is not None
                Al = np.ascontiguousarray(self.leave.T) if has_a else one
                if self.enter is None:
                    Bl, b_vec = np.zeros((1, self.n_labels)), True
                else:
                    b_vec = self.enter.ndim == 1
                    Bl = self.enter.reshape(1, -1) if b_vec else self.enter
                args = (_k.FACTORED, one, Al, has_a, np.ascontiguousarray(Bl), b_vec)
            self._cache["viterbi"] = _kd.super_viterbi(self.state_unary, self.n_durations, self.start,
                                                       self.end, self.open_end, *args, self.offsets)
        return self._cache["viterbi"]

    def max(self):
        """Score of the best segmentation of every sequence, float64 (B,) (-inf if infeasible)."""
        return self._viterbi_fast()[0].copy()

    def argmax(self):
        """Super-labels of the best segmentation (Yu 2010 eq. (11)), int64 (N,); ``ValueError`` naming an
        infeasible sequence. Time O(N·(K + M·K)) factored, O(N·K²) dense."""
        best, labels, _ = self._viterbi_fast()
        self._raise_if_infeasible(best, "argmax")
        return labels.copy()

    def argmax_segments(self):
        """Best segmentation of every sequence: list of B int64 (n_seg, 3) arrays of (start, end, label)
        rows (local, end inclusive). Raises like :meth:`argmax`."""
        best, labels, starts = self._viterbi_fast()
        self._raise_if_infeasible(best, "argmax")
        out = []
        for b in range(self.batch_size):
            o, T = int(self.offsets[b]), int(self.lengths[b])
            st = np.flatnonzero(starts[o:o + T])
            if T == 0:
                out.append(np.zeros((0, 3), dtype=np.int64))
                continue
            en = np.append(st[1:] - 1, T - 1)
            out.append(np.stack([st, en, labels[o + st]], axis=1).astype(np.int64))
        return out

    # -- constraints and the generic queries -----------------------------------------------------
    def constrain(self, allowed):
        """The structure restricted to segmentations whose every token allows its label (``allowed``
        (N, K) bool). A mask that is constant over the durations of each state stays a super-label
        structure (the state's unary is set to -inf where it is not allowed); any other mask gives the
        constrained generic structure."""
        mask = check_allowed_mask(allowed, (self.n_rows, self.n_labels))
        per = mask.reshape(self.n_rows, self.n_states, self.n_durations)
        if not np.array_equal(per, np.repeat(per[:, :, :1], self.n_durations, axis=2)):
            return self.generic().constrain(mask)
        out = SuperLabelSemiMarkov.__new__(SuperLabelSemiMarkov)
        out.__dict__.update(self.__dict__)
        unary = self.state_unary.copy()
        unary[~per[:, :, 0]] = -np.inf
        out.state_unary = unary
        out._cache = {k: v for k, v in self._cache.items() if k in ("transition", "spec")}
        return out

    def duration_marginals(self):
        """Expected segments per observed length, per duration table (the generic structure's
        :meth:`SemiMarkov.duration_marginals`)."""
        return self.generic().duration_marginals()

    def entropy(self):
        """Entropy of the posterior over segmentations (generic structure), float64 (B,)."""
        return self.generic().entropy()

    def kbest(self, k):
        """The k best segmentations (generic structure, :meth:`SemiMarkov.kbest`)."""
        return self.generic().kbest(k)

    def kbest_segments(self, k):
        """The k best segmentations as segment lists (generic structure)."""
        return self.generic().kbest_segments(k)

    def sample(self, n, random_state=None):
        """Exact posterior samples as token super-labels (generic structure, :meth:`SemiMarkov.sample`)."""
        return self.generic().sample(n, random_state)

    def sample_segments(self, n, random_state=None):
        """Exact posterior samples as segment lists (generic structure)."""
        return self.generic().sample_segments(n, random_state)

    def score(self, segments):
        """Log-score of given segmentations (generic structure, :meth:`SemiMarkov.score`)."""
        return self.generic().score(segments)

    def segment_marginals(self):
        """Dense segment marginals (generic structure, :meth:`SemiMarkov.segment_marginals`)."""
        return self.generic().segment_marginals()

    def iter_segment_marginals(self, threshold=1e-6):
        """Stream the segments above ``threshold`` (generic structure)."""
        return self.generic().iter_segment_marginals(threshold)
