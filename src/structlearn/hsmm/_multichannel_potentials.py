r"""Multi-channel (coupled) explicit-duration HSMM: parameters -> potentials of the engine's structures.

C channels; channel c has M_c states, an explicit duration law p_c(d | j) (d = 1..D_c) and its own
emission b_c over its own block of columns of X (possibly none: a hidden channel). The channels are
coupled through their transitions (Natarajan & Nevatia 2007, "Coupled hidden semi-Markov models for
activity recognition"; Yu 2010 §4, "multi-channel HSMM"): when channel c's segment ends at t, its next
state is drawn from the mixed-memory coupling (Saul & Jordan 1999, "Mixed memory Markov models")

.. math:: P(m'_c \mid m_1 \dots m_C \text{ at } t) = \sum_k θ_{ck}\, A^{(c,k)}_{m_k m'_c},

θ rows summing to one, A^{(c,k)} (M_k, M_c) row-stochastic and A^{(c,c)} with a zero diagonal (C = 1 is
the plain HSMM; θ = I gives C independent HSMMs).

Two inferences, both running the existing engine (no new recursion is written here):

* exact (:meth:`MultiChannelPotentials.product_chain`): every channel as its (state, remaining duration)
  chain (:mod:`structlearn.hsmm.expanded_hmm`, index ``s_c = j·D_c + r - 1``), and the product of
  those chains, S = Π_c M_c·D_c joint labels (channel 0 the most significant digit), with its coupled
  transitions stored sparsely and scored by :class:`~structlearn.engine.structures.SparseChain`. A step has
  E = Π_c (M_c·(D_c - 1) + M_c²·D_c) stored transitions: time O(N·E), memory O(N·S + E).
* factored (:meth:`MultiChannelPotentials.factored`): every channel is the engine's semi-Markov
  structure (:class:`~structlearn.engine.structures.SemiMarkov`) with time-varying transitions, the coupling
  averaged under the other channels' current posteriors,
  a_c^t(i, j) = θ_cc A^{(c,c)}_ij + Σ_{k≠c} θ_ck Σ_m γ_k(t, m) A^{(c,k)}_mj, and, as extra unary
  log-potentials, mean-field style messages from the transition factors of the channels it drives
  (:meth:`MultiChannelPotentials.child_message`); swept channel by channel (Gauss–Seidel) until the
  posteriors stop changing — a structured, factored approximation (in the spirit of Ghahramani &
  Jordan 1997's structured variational factorial HMM). Time per sweep
  O(N·Σ_c (D_c·M_c + M_c² + M_c·Σ_k M_k²)), memory O(N·Σ_c M_c²). Exact for C = 1 and for θ = I.

Both give the expected counts of the EM of :mod:`structlearn.hsmm.multichannel`: per channel
the start and state posteriors, the completed duration counts, and per coupling component k the
counts n^{(c,k)} (M_k, M_c) of the mixed-memory responsibilities (Saul & Jordan 1999, §3).
"""
from collections import namedtuple

import numpy as np

from ..engine.structures.semimarkov import SemiMarkov
from ..engine.structures.sparse_chain import SparseChain
from ..distributions.durations.censoring import complete_counts, duration_tables

__all__ = ["MultiChannelPotentials", "Factored", "ProductLayout", "MC_CENSORING", "m_step"]

#: Smallest probability a child message uses inside its logarithm (see ``child_message``).
_MSG_FLOOR = 1e-12

#: Boundary conditions supported (the residual-life start of ``"both"`` is not).
MC_CENSORING = ("none", "right")

#: The joint labels of the product chain: ``sub`` (C, S) each channel's expanded index, ``state`` (C, S)
#: its HSMM state, ``remaining`` (C, S) its remaining duration, ``tuple_index`` (S,) the index of the
#: joint state tuple (m_1..m_C) in the C-order grid of shape ``n_states``.
ProductLayout = namedtuple("ProductLayout", ["sub", "state", "remaining", "tuple_index"])

#: The result of the factored inference: ``structures`` (one SemiMarkov per channel, with the final
#: averaged coupling), ``gammas`` (list of (N, M_c) posteriors), ``log_likelihood`` (B,) Σ_c log Z_c,
#: ``transitions`` (list of (N, M_c, M_c) a_c^t, linear space), ``n_sweeps``, ``converged``, ``delta``
#: (the last max |Δγ|).
Factored = namedtuple("Factored", ["structures", "gammas", "log_likelihood", "transitions", "n_sweeps",
                                   "converged", "delta"])


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))


class MultiChannelPotentials:
    """The potentials of a coupled multi-channel HSMM (module docstring).

    Parameters
    ----------
    startprob : list of C ndarrays (M_c,)
        π_c, linear space.
    coupling : ndarray of float64, shape (C, C)
        θ, rows sum to one.
    transmat : list of C lists of C ndarrays
        ``transmat[c][k]`` = A^{(c,k)}, shape (M_k, M_c) "from m_k, to m'_c"; A^{(c,c)} zero diagonal.
    durations : list of C duration objects
        Each with ``log_pmf(D_c)`` of shape (D_c, M_c).
    emissions : list of C emission objects or None
        None: the channel observes nothing (log-density 0).
    channels : list of C int arrays
        The columns of X each channel observes.
    max_duration : list of C int
    censoring : {"none", "right"}
    """

    def __init__(self, startprob, coupling, transmat, durations, emissions, channels, max_duration,
                 censoring):
        self.startprob = startprob
        self.coupling = np.asarray(coupling, dtype=np.float64)
        self.transmat = transmat
        self.durations = durations
        self.emissions = emissions
        self.channels = channels
        self.max_duration = [int(d) for d in max_duration]
        self.censoring = censoring

    @property
    def n_channels(self):
        return len(self.startprob)

    @property
    def n_states(self):
        return tuple(int(p.shape[0]) for p in self.startprob)

    def log_pmfs(self):
        """Per channel the duration log-pmf (D_c, M_c)."""
        out = []
        for c, (dur, D) in enumerate(zip(self.durations, self.max_duration)):
            lp = np.asarray(dur.log_pmf(D), dtype=np.float64)
            if lp.shape != (D, self.n_states[c]):
                raise ValueError(f"the duration log_pmf of channel {c} must have shape "
                                 f"({D}, {self.n_states[c]}); got {lp.shape}")
            out.append(lp)
        return out

    def unaries(self, X, allowed=None):
        """Per channel the emission log-densities (N, M_c) of its columns (0 for a hidden channel);
        -inf where ``allowed[c]`` (N, M_c) bool is False."""
        out = []
        for c, (em, cols) in enumerate(zip(self.emissions, self.channels)):
            u = (np.zeros((X.shape[0], self.n_states[c])) if em is None
                 else np.asarray(em.log_density(X[:, cols]), dtype=np.float64))
            if allowed is not None and allowed[c] is not None:
                u = np.where(allowed[c], u, -np.inf)
            out.append(np.ascontiguousarray(u))
        return out

    def next_state(self, c, tuples):
        """P(m'_c | m_1..m_C), shape (n, M_c), for joint state tuples ``tuples`` (n, C) int."""
        q = np.zeros((tuples.shape[0], self.n_states[c]))
        for k in range(self.n_channels):
            if self.coupling[c, k] > 0:
                q += self.coupling[c, k] * self.transmat[c][k][tuples[:, k]]
        return q

    # ==================================================================================================
    # exact: the product of the (state, remaining duration) chains
    # ==================================================================================================
    def product_size(self):
        """(S, E): joint labels Π_c M_c·D_c and stored transitions Π_c (M_c·(D_c - 1) + M_c²·D_c)."""
        S = E = 1
        for M, D in zip(self.n_states, self.max_duration):
            S *= M * D
            E *= M * (D - 1) + M * M * D
        return S, E

    def layout(self):
        """The :data:`ProductLayout` of the S joint labels."""
        sizes = [M * D for M, D in zip(self.n_states, self.max_duration)]
        sub = np.array(np.unravel_index(np.arange(int(np.prod(sizes))), sizes), dtype=np.int64)
        D = np.array(self.max_duration, dtype=np.int64)[:, None]
        state, remaining = sub // D, sub % D + 1
        return ProductLayout(sub, state, remaining,
                             np.ravel_multi_index(tuple(state), self.n_states).astype(np.int64))

    def product_transitions(self, lay):
        """CSR (indptr, indices, log values) of the joint transitions "from, to".

        Channel c with remaining duration r >= 2 steps to (j, r - 1) with probability 1; with r = 1 its
        segment ends and it enters (k, d) with P(k | joint state) p_c(d | k). Entries of probability 0
        are not stored. Time and memory O(E).
        """
        C = self.n_channels
        lps = self.log_pmfs()
        sizes = [M * D for M, D in zip(self.n_states, self.max_duration)]
        strides = np.array([int(np.prod(sizes[c + 1:])) for c in range(C)], dtype=np.int64)
        exits = lay.remaining == 1  # (C, S)
        pattern = (exits * (1 << np.arange(C))[:, None]).sum(axis=0)
        srcs, dsts, vals = [], [], []
        for p in np.unique(pattern):
            s = np.flatnonzero(pattern == p)
            ex = [c for c in range(C) if (p >> c) & 1]
            base = np.zeros(s.size, dtype=np.int64)
            for c in range(C):
                if c not in ex:
                    base += (lay.sub[c, s] - 1) * strides[c]
            dst = base[:, None]
            val = np.zeros((s.size, 1))
            tuples = lay.state[:, s].T
            for c in ex:
                Dc = self.max_duration[c]
                t = np.arange(sizes[c])
                lq = _log(self.next_state(c, tuples))[:, t // Dc] + lps[c][t % Dc, t // Dc][None]
                dst = (dst[:, :, None] + (t * strides[c])[None, None]).reshape(s.size, -1)
                val = (val[:, :, None] + lq[:, None, :]).reshape(s.size, -1)
            keep = val > -np.inf
            srcs.append(np.broadcast_to(s[:, None], keep.shape)[keep])
            dsts.append(dst[keep])
            vals.append(val[keep])
        src, dst, val = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(vals)
        order = np.argsort(src, kind="stable")
        indptr = np.zeros(lay.sub.shape[1] + 1, dtype=np.int64)
        np.add.at(indptr, src + 1, 1)
        return np.cumsum(indptr), dst[order].astype(np.int64), val[order].astype(np.float64)

    def product_chain(self, X, lengths, allowed=None, lay=None):
        """The :class:`~structlearn.engine.structures.SparseChain` of the joint (state, remaining duration)
        chain on validated ``X`` (N, F): ``log_partition()`` is log P(o) of every sequence.

        Start: Π_c π_c(j_c) p_c(r_c | j_c); end: 1 (``"right"``: segments may go on) or 1 only where
        every channel has r = 1 (``"none"``). Unary: Σ_c log b_c(j_c, o_t[cols_c]). Time O(N·S + E).
        """
        lay = self.layout() if lay is None else lay
        lps = self.log_pmfs()
        start = np.zeros(lay.sub.shape[1])
        unary = np.zeros((X.shape[0], lay.sub.shape[1]))
        for c, u in enumerate(self.unaries(X, allowed)):
            j, r = lay.state[c], lay.remaining[c]
            start += _log(self.startprob[c])[j] + lps[c][r - 1, j]
            unary += u[:, j]
        end = (np.zeros(start.shape) if self.censoring == "right"
               else np.where(np.all(lay.remaining == 1, axis=0), 0.0, -np.inf))
        return SparseChain(unary, self.product_transitions(lay), start, end, lengths)

    def product_statistics(self, chain, lay, lengths, offsets):
        """The expected counts of the exact posterior of ``chain`` (:meth:`product_chain`).

        Returns
        -------
        gammas : list of C ndarrays (N, M_c)
            P(S^c_t = j | o).
        stats : list of C dicts
            ``"start"`` (M_c,) expected first states, ``"counts"`` (D_c, M_c) expected complete
            durations (segments entering (j, d), the first included), ``"left"`` (M_c,) zeros,
            ``"coupling"`` list over k of (M_k, M_c) responsibility counts n^{(c,k)}.
        """
        C = self.n_channels
        M = self.n_states
        sizes = [m * d for m, d in zip(M, self.max_duration)]
        mg = chain.marginals(edge="total")
        N = mg.unary.shape[0]
        grid = mg.unary.reshape((N, *sizes))
        src = np.repeat(np.arange(lay.sub.shape[1]), np.diff(chain.indptr))
        dst = chain.indices
        w = mg.edge
        firsts = offsets[:-1][lengths > 0]
        tuples = np.array(np.unravel_index(np.arange(int(np.prod(M))), M)).T  # (ΠM, C)
        gammas, stats = [], []
        for c in range(C):
            Dc = self.max_duration[c]
            marg = grid.sum(axis=tuple(a + 1 for a in range(C) if a != c)).reshape(N, M[c], Dc)
            gammas.append(marg.sum(axis=2))
            first = marg[firsts].sum(axis=0)  # (M_c, D_c)
            ex = lay.remaining[c][src] == 1
            jd, rd = lay.state[c][dst[ex]], lay.remaining[c][dst[ex]]
            counts = first.T + np.bincount((rd - 1) * M[c] + jd, w[ex], Dc * M[c]).reshape(Dc, M[c])
            xi = np.bincount(lay.tuple_index[src[ex]] * M[c] + jd, w[ex],
                             len(tuples) * M[c]).reshape(len(tuples), M[c])
            stats.append({"start": first.sum(axis=1), "counts": counts, "left": np.zeros(M[c]),
                          "coupling": self._responsibilities(c, tuples, xi)})
        return gammas, stats

    def _responsibilities(self, c, tuples, xi):
        """n^{(c,k)}[a, b] = Σ_{tuples with m_k = a} ξ(tuple, b) θ_ck A^{(c,k)}_{a b} / q(b | tuple)."""
        q = self.next_state(c, tuples)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(xi > 0, xi / q, 0.0)
        out = []
        for k in range(self.n_channels):
            n = np.zeros((self.n_states[k], self.n_states[c]))
            np.add.at(n, tuples[:, k], ratio)
            out.append(n * self.coupling[c, k] * self.transmat[c][k])
        return out

    # ==================================================================================================
    # factored: one semi-Markov structure per channel, the coupling averaged over the others
    # ==================================================================================================
    def averaged_transitions(self, c, gammas):
        """a_c^t(i, j) (N, M_c, M_c), linear space: the coupling with every other channel k replaced by
        its posterior γ_k(t) (row t scores a segment ending at t and the next starting at t + 1)."""
        N = gammas[c].shape[0]
        own = self.coupling[c, c] * self.transmat[c][c]
        other = np.zeros((N, self.n_states[c]))
        for k in range(self.n_channels):
            if k != c and self.coupling[c, k] > 0:
                other += self.coupling[c, k] * (gammas[k] @ self.transmat[c][k])
        return own[None] + other[:, None, :]

    def channel_structure(self, c, unary, trans, lengths, lps):
        """The SemiMarkov of channel c with time-varying transitions ``trans`` (N, M_c, M_c)."""
        tab = duration_tables(lps[c], self.censoring)
        Dc = max(1, min(self.max_duration[c], int(lengths.max()) if lengths.size else 1))
        return SemiMarkov(unary, tab["middle"][:Dc], _log(trans), lengths=lengths,
                          start=_log(self.startprob[c]), allow_same_label=True,
                          first_duration=tab["first"][:Dc], last_duration=tab["last"][:Dc],
                          single_duration=tab["single"][:Dc])

    def child_message(self, c, k, gamma_c, xi_k, trans_k):
        """The evidence that channel k's segment ends give about channel c's state, (N, M_c) log space:
        u[t, m] = Σ_ij ξ_k(t, i, j) log(a_k^t(i, j; m_c = m) / a_k^t(i, j)), where a_k^t(·; m_c = m) is
        the averaged coupling of channel k with channel c's state fixed to m (a mean-field style message
        from k's transition factors to c; zero when θ_kc = 0). Time O(N·M_k²·M_c)."""
        th = self.coupling[k, c]
        if th == 0:
            return np.zeros(gamma_c.shape)
        A = self.transmat[k][c]  # (M_c, M_k)
        mean = gamma_c @ A  # (N, M_k): channel c's averaged contribution
        # a_k^t(i, j; m) = trans_k[t, i, j] + th (A[m, j] - mean[t, j])
        with np.errstate(divide="ignore", invalid="ignore"):
            shifted = trans_k[:, None, :, :] + th * (A[None, :, None, :] - mean[:, None, None, :])
            # floored: a message never forbids a state outright (the approximation could make a
            # sequence infeasible that is not)
            ratio = np.log(np.maximum(shifted, _MSG_FLOOR)) - np.log(np.maximum(trans_k, _MSG_FLOOR))[:, None]
            terms = np.where(xi_k[:, None] > 0, xi_k[:, None] * ratio, 0.0)
        return terms.sum(axis=(2, 3))

    def factored(self, X, lengths, allowed=None, max_sweeps=100, tol=1e-8, gammas=None):
        """The factored approximation (module docstring) on validated ``X``.

        Sweeps c = 0..C-1: channel c's semi-Markov structure gets the transitions a_c^t averaged over
        the other channels' current posteriors and, as extra unary log-potentials, the messages
        :meth:`child_message` of the channels it drives; one forward–backward gives its new posteriors.
        Stops when max |Δγ| < ``tol`` or after ``max_sweeps`` sweeps. Initial posteriors: ``gammas`` or
        uniform. Returns :data:`Factored`; ``log_likelihood`` = Σ_c (log Z_c - E_γc[messages_c]) (the
        evidence a message carries is already in the log Z of the channel that sends it): log P(o) for
        C = 1 and for θ = I, an approximation otherwise.
        """
        C = self.n_channels
        N = X.shape[0]
        unaries = self.unaries(X, allowed)
        lps = self.log_pmfs()
        gam = ([np.full((N, m), 1.0 / m) for m in self.n_states] if gammas is None
               else [g.copy() for g in gammas])
        structs, trans, xis = [None] * C, [None] * C, [None] * C
        log_z = np.zeros((C, lengths.shape[0]))
        seq = np.repeat(np.arange(lengths.shape[0]), lengths)
        delta, sweeps, converged = np.inf, 0, False
        coupled = C > 1 and np.any(self.coupling[~np.eye(C, dtype=bool)] > 0)
        for sweeps in range(1, max(1, max_sweeps) + 1):
            delta = 0.0
            for c in range(C):
                trans[c] = self.averaged_transitions(c, gam)
                msg = np.zeros((N, self.n_states[c]))
                for k in range(C):
                    if k != c and xis[k] is not None:
                        msg += self.child_message(c, k, gam[c], xis[k], trans[k])
                structs[c] = self.channel_structure(c, unaries[c] + msg, trans[c], lengths, lps)
                g, xis[c] = structs[c].marginals(edge="full")
                # the messages' evidence is counted in the channels that emit them: not twice
                log_z[c] = structs[c].log_partition() - np.bincount(seq, np.where(g > 0, g * msg, 0.0).sum(axis=1),
                                                                   lengths.shape[0])
                delta = max(delta, float(np.abs(g - gam[c]).max(initial=0.0)))
                gam[c] = g
            if not coupled or delta < tol:
                converged = True
                break
        return Factored(structs, gam, log_z.sum(axis=0), trans, sweeps, converged, delta)

    def factored_statistics(self, fac, lengths, offsets):
        """Expected counts (as :meth:`product_statistics`) of the factored posterior: the joint state of
        the other channels at a segment end is taken as independent with laws γ_k(t)."""
        firsts = offsets[:-1][lengths > 0]
        lps = self.log_pmfs()
        stats = []
        for c, sm in enumerate(fac.structures):
            gamma, xi = sm.marginals(edge="full")  # xi (N, M_c, M_c)
            q = fac.transitions[c]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(xi > 0, xi / q, 0.0)
            own = ratio.sum(axis=0) * self.coupling[c, c] * self.transmat[c][c]
            into = ratio.sum(axis=1)  # (N, M_c): Σ_i ξ[t, i, j] / q_t(i, j)
            comp = []
            for k in range(self.n_channels):
                if k == c:
                    comp.append(own)
                else:
                    comp.append(self.coupling[c, k] * self.transmat[c][k] * (fac.gammas[k].T @ into))
            dm = sm.duration_marginals()
            D = self.max_duration[c]
            tables = {name: np.pad(getattr(dm, name).sum(axis=0), ((0, D - dm.middle.shape[1]), (0, 0)))
                      for name in dm._fields}
            counts, left = complete_counts(tables, lps[c], self.censoring)
            stats.append({"start": gamma[firsts].sum(axis=0), "counts": counts, "left": left,
                          "coupling": comp})
        return stats

    # ==================================================================================================
    # sampling
    # ==================================================================================================
    def sample(self, n_samples, n_features, rng):
        """One sequence of the generative process: X (n, F) (NaN in columns no channel observes) and
        states (n, C). All channels start at 0 (π_c, p_c); a channel whose segment ends at t draws its
        next state from the coupling given every channel's state at t, then its duration."""
        C = self.n_channels
        states = np.zeros((n_samples, C), dtype=np.int64)
        left = np.zeros(C, dtype=np.int64)
        cur = np.zeros(C, dtype=np.int64)
        for c in range(C):
            cur[c] = rng.choice(self.n_states[c], p=self.startprob[c])
            left[c] = self.durations[c].sample(np.array([cur[c]]), self.max_duration[c], rng)[0]
        for t in range(n_samples):
            states[t] = cur
            ending = np.flatnonzero(left == 1)
            left -= 1
            nxt = cur.copy()
            for c in ending:
                q = self.next_state(c, cur[None])[0]
                nxt[c] = rng.choice(self.n_states[c], p=q / q.sum())
                left[c] = self.durations[c].sample(np.array([nxt[c]]), self.max_duration[c], rng)[0]
            cur = nxt
        X = np.full((n_samples, n_features), np.nan)
        for c, (em, cols) in enumerate(zip(self.emissions, self.channels)):
            if em is not None and len(cols):
                X[:, cols] = np.asarray(em.sample(states[:, c], rng), dtype=np.float64).reshape(n_samples, -1)
        return X, states


def m_step(potentials, stats, params):
    """Update the parameters of ``potentials`` in place from summed expected counts ``stats`` (list of C
    dicts of :meth:`MultiChannelPotentials.product_statistics`), for the letters of ``params`` (``s``
    start, ``c`` coupling weights θ, ``t`` coupling matrices A, ``d`` durations). Rows without counts
    keep their values. Exact for π, θ, A given the responsibilities (Saul & Jordan 1999, eqs. 9–10):
    θ_ck ∝ Σ n^{(c,k)}, A^{(c,k)}_ab ∝ n^{(c,k)}_ab."""
    C = potentials.n_channels
    for c in range(C):
        st = stats[c]
        if "s" in params and st["start"].sum() > 0:
            potentials.startprob[c] = st["start"] / st["start"].sum()
        comp = st["coupling"]
        if "c" in params and C > 1:
            tot = np.array([n.sum() for n in comp])
            if tot.sum() > 0:
                potentials.coupling[c] = tot / tot.sum()
        if "t" in params:
            for k in range(C):
                n = comp[k]
                rows = n.sum(axis=1)
                ok = rows > 0
                A = potentials.transmat[c][k].copy()
                A[ok] = n[ok] / rows[ok, None]
                potentials.transmat[c][k] = A
        if "d" in params:
            potentials.durations[c].fit(st["counts"], st["left"])
