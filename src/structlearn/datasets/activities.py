"""Two-level activity data for dynamic CRFs: an indoor x/y track simulator and the PlaceLab (MIT) events.

Both sources give, per time step, a *complex* (top-level) activity and a *primitive* (bottom-level)
activity, cut into windows of ``window`` steps. One window is one 2-level DCRF graph (Tran, Phung &
Venkatesh, "Learning Structured Outputs from Partial Labels using Forest Ensemble", arXiv:1407.6432
(2014), section "Activity recognition"; cited below as Tran et al. (2014)): the top chain, the bottom
chain, and one parent–child edge per time step.

Layout of a :class:`~sklearn.utils.Bunch` returned by :func:`simulate_indoor_tracks` and
:func:`placelab_two_level` (W windows, window w has T_w steps):

- ``feat_top`` / ``feat_bottom``: lists of W float64 arrays (T_w, D_top) / (T_w, D_bottom) — the
  data-association features of each level (a constant 1 column included);
- ``symbols``: list of W int64 arrays (T_w,) — one discrete observation per step for HMMs
  (``n_symbols`` values);
- ``y_top`` / ``y_bottom``: lists of W int64 arrays (T_w,) — labels indexing ``top_names`` /
  ``bottom_names``;
- ``group``: (W,) int64 — the sequence (simulated day / recorded day) each window was cut from, for
  splitting without leaking a day into both sides.

:func:`to_graphs` turns windows into ``GraphCRF`` samples: nodes ``0..T-1`` are the top level,
``T..2T-1`` the bottom level, one label space of ``K_top + K_bottom`` labels (top labels first), node
features in two blocks (a top node's features fill the first ``D_top`` columns, a bottom node's the
last ``D_bottom``), edges ordered top chain, bottom chain, parent–child
(:func:`~structlearn.engine.structures.graphs.two_level_edges`), with a one-hot edge type as edge features.
"""
import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..engine.structures.graphs import two_level_edges

__all__ = ["simulate_indoor_tracks", "placelab_two_level", "to_graphs", "hide_labels", "HOUSE_ROOMS",
           "PRIMITIVES", "COMPLEX_ACTIVITIES"]

#: Rooms of the simulated 6 m × 4 m flat: name -> (x0, x1, y0, y1) in metres. The floor is quantised
#: into 24 squares of 1 m² (Tran et al. (2014): "we quantize them into 24 squares").
HOUSE_ROOMS = {"kitchen": (0, 2, 0, 2), "dining": (2, 4, 0, 2), "living": (4, 6, 0, 2),
               "office": (0, 2, 2, 4), "hall": (2, 4, 2, 4), "bathroom": (4, 6, 2, 4)}
_W, _H = 6, 4

# Places where stationary primitives happen (x, y).
_SPOTS = {"stove": (0.4, 0.5), "fridge": (1.6, 0.3), "table": (3.0, 1.0), "desk": (0.6, 3.4),
          "tv": (5.2, 1.2), "sink": (5.3, 3.3), "door": (3.0, 3.8)}

#: Primitive (bottom-level) activities: name -> (kind, place). "walk" moves to the place, "stay" jitters
#: around it.
PRIMITIVES = {
    "walk to kitchen": ("walk", "stove"), "use stove": ("stay", "stove"),
    "use fridge": ("stay", "fridge"), "walk to table": ("walk", "table"), "eat": ("stay", "table"),
    "walk to office": ("walk", "desk"), "use computer": ("stay", "desk"),
    "walk to living room": ("walk", "tv"), "watch TV": ("stay", "tv"),
    "walk to bathroom": ("walk", "sink"), "wash": ("stay", "sink"), "walk to door": ("walk", "door"),
}

#: Complex (top-level) activities: name -> list of alternative primitive scripts (sampled uniformly).
#: Several primitives ("walk to kitchen", "use fridge", "walk to table") occur in more than one complex
#: activity, so the bottom level needs the top level's context.
COMPLEX_ACTIVITIES = {
    "breakfast": [["walk to kitchen", "use fridge", "use stove", "walk to table", "eat"],
                  ["walk to kitchen", "use stove", "use fridge", "use stove", "walk to table", "eat"]],
    "work": [["walk to office", "use computer"],
             ["walk to office", "use computer", "walk to kitchen", "use fridge", "walk to office",
              "use computer"]],
    "relax": [["walk to living room", "watch TV"],
              ["walk to kitchen", "use fridge", "walk to table", "walk to living room", "watch TV"]],
    "hygiene": [["walk to bathroom", "wash"], ["walk to bathroom", "wash", "walk to door"]],
}

# Day-level Markov chain over complex activities (rows: from, in COMPLEX_ACTIVITIES order).
_TOP_TRANS = np.array([[0.0, 0.6, 0.2, 0.2],
                       [0.2, 0.0, 0.5, 0.3],
                       [0.3, 0.4, 0.0, 0.3],
                       [0.5, 0.3, 0.2, 0.0]])


def _cells(xy):
    """Index of the 1 m square (0..23) holding each point; (T, 2) -> (T,)."""
    cx = np.clip(np.floor(xy[:, 0]).astype(np.int64), 0, _W - 1)
    cy = np.clip(np.floor(xy[:, 1]).astype(np.int64), 0, _H - 1)
    return cy * _W + cx


def _speed_bins(speed):
    return np.digitize(speed, [0.15, 0.4])  # still, slow, walking


def _shifted(a, eps):
    """a[t + eps] with indices clipped to the sequence."""
    T = len(a)
    return a[np.clip(np.arange(T) + eps, 0, T - 1)]


def _track_features(obs):
    """Per-step features of one noisy track ``obs`` (T, 2).

    Returns (feat_top (T, 5·24+1), feat_bottom (T, 5·(24+3)+4+1), symbols (T,)).
    Bottom: one-hot square and speed class at offsets −2..2 and the heading quadrant at t; top: one-hot
    square at offsets −20, −10, 0, 10, 20 (Tran et al. (2014) use a wide window with a step of 5); both
    end with a constant 1. Symbols (for HMMs): square × speed class (72 values).
    """
    T = len(obs)
    vel = np.zeros_like(obs)
    if T > 1:
        vel = np.gradient(obs, axis=0)
    speed = np.hypot(vel[:, 0], vel[:, 1])
    cell = _cells(obs)
    sb = _speed_bins(speed)
    eye_c, eye_s = np.eye(_W * _H), np.eye(3)
    bottom = [np.concatenate([eye_c[_shifted(cell, e)], eye_s[_shifted(sb, e)]], axis=1)
              for e in range(-2, 3)]
    quad = (np.arctan2(vel[:, 1], vel[:, 0]) + np.pi) / (np.pi / 2)
    head = np.eye(4)[np.clip(quad.astype(np.int64), 0, 3)] * (sb[:, None] > 0)
    bottom = np.concatenate(bottom + [head, np.ones((T, 1))], axis=1)
    top = np.concatenate([eye_c[_shifted(cell, e)] for e in (-20, -10, 0, 10, 20)] + [np.ones((T, 1))],
                         axis=1)
    return top, bottom, cell * 3 + sb


def _simulate_day(rng, n_complex, noise):
    tops = list(COMPLEX_ACTIVITIES)
    prims = list(PRIMITIVES)
    pos = np.array(_SPOTS["door"], dtype=np.float64)
    xy, y_top, y_bot = [], [], []
    c = int(rng.integers(len(tops)))
    for k in range(n_complex):
        if k:
            c = int(rng.choice(len(tops), p=_TOP_TRANS[c]))
        scripts = COMPLEX_ACTIVITIES[tops[c]]
        for name in scripts[int(rng.integers(len(scripts)))]:
            kind, place = PRIMITIVES[name]
            target = np.array(_SPOTS[place])
            steps = []
            if kind == "walk":
                while True:
                    d = target - pos
                    dist = np.hypot(*d)
                    if dist < 0.3 and len(steps) >= 2:
                        break
                    v = rng.normal(0.5, 0.08)
                    pos = pos + d / max(dist, 1e-9) * min(v, dist) + rng.normal(0, 0.05, 2)
                    steps.append(pos.copy())
            else:
                # stays last 6 + Geometric(1/12) steps, jittering around the spot
                for _ in range(5 + int(rng.geometric(1 / 12))):
                    pos = target + rng.normal(0, 0.12, 2)
                    steps.append(pos.copy())
            xy.extend(steps)
            y_top.extend([c] * len(steps))
            y_bot.extend([prims.index(name)] * len(steps))
    xy = np.array(xy)
    obs = xy + rng.normal(0, noise, xy.shape)
    obs[:, 0] = np.clip(obs[:, 0], 0, _W - 1e-6)
    obs[:, 1] = np.clip(obs[:, 1], 0, _H - 1e-6)
    return xy, obs, np.array(y_top, dtype=np.int64), np.array(y_bot, dtype=np.int64)


def _windows(feats_top, feats_bottom, symbols, y_top, y_bottom, window):
    """Cut per-sequence arrays into consecutive windows (the last one of a sequence may be shorter but
    never below window // 2 steps: it is merged into the previous one then)."""
    out = Bunch(feat_top=[], feat_bottom=[], symbols=[], y_top=[], y_bottom=[], group=[])
    for g, arrays in enumerate(zip(feats_top, feats_bottom, symbols, y_top, y_bottom)):
        T = len(arrays[0])
        cuts = list(range(0, T, window)) + [T]
        if len(cuts) > 2 and cuts[-1] - cuts[-2] < window // 2:
            del cuts[-2]
        for a, b in zip(cuts[:-1], cuts[1:]):
            for key, arr in zip(("feat_top", "feat_bottom", "symbols", "y_top", "y_bottom"), arrays):
                out[key].append(np.ascontiguousarray(arr[a:b]))
            out.group.append(g)
    out.group = np.array(out.group, dtype=np.int64)
    return out


def simulate_indoor_tracks(n_days=20, n_complex=8, window=60, noise=0.2, random_state=None):
    """Simulated indoor x/y tracks with complex (top) and primitive (bottom) activity labels.

    A person in a 6 m × 4 m flat (:data:`HOUSE_ROOMS`, 24 squares of 1 m²) performs ``n_complex``
    complex activities a day (:data:`COMPLEX_ACTIVITIES`, a Markov chain over breakfast / work / relax /
    hygiene); each expands into a script of primitive activities (:data:`PRIMITIVES`, 12 of them:
    walking to a place at ≈0.5 m per step, or staying at a spot for 6 + Geometric(1/12) steps). The
    observation is the position plus Gaussian noise (``noise`` metres), from which the features of
    Tran et al. (2014) are extracted: quantised position, speed class and heading around each step.

    Parameters
    ----------
    n_days : int
        Number of simulated sequences (``group`` values).
    n_complex : int
        Complex activities per day (≈ 20 steps each on average).
    window : int
        Steps per window (one DCRF graph per window).
    noise : float
        Standard deviation of the observation noise in metres.
    random_state : None, int or numpy RandomState/Generator seed
        Seeds a ``numpy.random.Generator``; equal seeds give identical data.

    Returns
    -------
    Bunch
        The layout of the module docstring, plus ``xy`` and ``obs`` (lists of (T_day, 2) float64: true
        and noisy positions per day) and ``n_symbols`` = 72.

    Raises
    ------
    ValueError
        Non-positive ``n_days``, ``n_complex`` or ``window`` (< 2), negative ``noise``.
    """
    for name, v, lo in (("n_days", n_days, 1), ("n_complex", n_complex, 1), ("window", window, 2)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
            raise ValueError(f"`{name}` must be an integer >= {lo}; got {v!r}")
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"`noise` must be a non-negative number of metres; got {noise!r}")
    seed = check_random_state(random_state).randint(2**31 - 1) \
        if not isinstance(random_state, (int, np.integer)) else int(random_state)
    rng = np.random.default_rng(seed)
    days = [_simulate_day(rng, n_complex, noise) for _ in range(n_days)]
    feats = [_track_features(obs) for _, obs, _, _ in days]
    out = _windows([f[0] for f in feats], [f[1] for f in feats], [f[2] for f in feats],
                   [d[2] for d in days], [d[3] for d in days], window)
    out.xy = [d[0] for d in days]
    out.obs = [d[1] for d in days]
    out.top_names = list(COMPLEX_ACTIVITIES)
    out.bottom_names = list(PRIMITIVES)
    out.n_symbols = _W * _H * 3
    return out


def placelab_two_level(days, taxonomy, vocab, top="category", bottom="activity", window=50,
                       min_count=40, context=10):
    """Two label levels of the MIT PlaceLab / Munguia Tapia home data, windowed for 2-level DCRFs.

    Takes the parsed days of one subject as returned by ``load_subject`` in
    ``examples/hhmm_placelab.py`` (one sequence per day: the reed-switch events of that day's activity
    instances in time order, each with its activity label) — this function does not parse files.
    One time step is one sensor event.

    Parameters
    ----------
    days : list of dict
        ``{"date": str, "sensors": (n,) int64 indices into vocab, "activity": (n,) str}`` per day.
    taxonomy : dict
        ``activity -> (category, heading)``.
    vocab : list of str
        Sensor ids.
    top, bottom : {"heading", "category", "activity"}
        The two label levels used (``top`` must be coarser than ``bottom``).
    window : int
        Events per window.
    min_count : int
        Bottom labels with fewer events than this (over all days) are merged into ``"Other"`` (top
        label ``"Other"``), so the combined label space stays small enough for exact inference.
    context : int
        Half-width of the top level's bag-of-sensors window.

    Returns
    -------
    Bunch
        The layout of the module docstring; ``feat_bottom``: one-hot sensor at t−1, t, t+1 and a 1
        (3V+1 columns); ``feat_top``: one-hot sensor at t, the normalised bag of sensors fired within
        ±``context`` events, and a 1 (2V+1 columns); ``symbols``: the sensor index (``n_symbols`` = V).

    Raises
    ------
    ValueError
        Unknown level names or ``top`` not coarser than ``bottom``.
    """
    order = ("heading", "category", "activity")
    if top not in order or bottom not in order or order.index(top) >= order.index(bottom):
        raise ValueError(f"`top` and `bottom` must be levels of {order} with `top` coarser than "
                         f"`bottom`; got top={top!r}, bottom={bottom!r}")
    if not isinstance(window, (int, np.integer)) or window < 2:
        raise ValueError(f"`window` must be an integer >= 2; got {window!r}")

    def level(act, name):
        return {"activity": act, "category": taxonomy[act][0], "heading": taxonomy[act][1]}[name]

    days = [d for d in days if len(d["sensors"])]
    acts = np.concatenate([d["activity"] for d in days]) if days else np.array([], str)
    names, counts = np.unique([level(a, bottom) for a in acts], return_counts=True)
    keep = {n for n, c in zip(names, counts) if c >= min_count}

    def pair(a):
        b = level(a, bottom)
        return (level(a, top), b) if b in keep else ("Other", "Other")

    pairs = [[pair(a) for a in d["activity"]] for d in days]
    top_names = sorted({p[0] for ps in pairs for p in ps})
    bottom_names = sorted({p[1] for ps in pairs for p in ps})
    ti = {n: i for i, n in enumerate(top_names)}
    bi = {n: i for i, n in enumerate(bottom_names)}
    V = len(vocab)
    eye = np.eye(V)
    ft, fb, sy, yt, yb = [], [], [], [], []
    for d, ps in zip(days, pairs):
        s = np.asarray(d["sensors"], dtype=np.int64)
        T = len(s)
        prev = np.where(np.arange(T)[:, None] > 0, eye[_shifted(s, -1)], 0.0)
        nxt = np.where(np.arange(T)[:, None] < T - 1, eye[_shifted(s, 1)], 0.0)
        fb.append(np.concatenate([prev, eye[s], nxt, np.ones((T, 1))], axis=1))
        cs = np.vstack([np.zeros(V), np.cumsum(eye[s], axis=0)])
        lo = np.clip(np.arange(T) - context, 0, T)
        hi = np.clip(np.arange(T) + context + 1, 0, T)
        bag = (cs[hi] - cs[lo]) / (hi - lo)[:, None]
        ft.append(np.concatenate([eye[s], bag, np.ones((T, 1))], axis=1))
        sy.append(s)
        yt.append(np.array([ti[p[0]] for p in ps], dtype=np.int64))
        yb.append(np.array([bi[p[1]] for p in ps], dtype=np.int64))
    out = _windows(ft, fb, sy, yt, yb, window)
    out.top_names = top_names
    out.bottom_names = bottom_names
    out.n_symbols = V
    out.dates = [d["date"] for d in days]
    return out


def to_graphs(data, index=None):
    """``GraphCRF`` samples of windows ``index`` (default all) of a two-level Bunch.

    Returns
    -------
    X : list of (node_features (2T, D_top + D_bottom) float64, edges (3T−2, 2) int64,
        edge_features (3T−2, 3) float64 one-hot edge type)
    y : list of (2T,) int64 — top labels ``0..K_top−1`` on nodes ``0..T−1``, bottom labels shifted by
        ``K_top`` on nodes ``T..2T−1``.
    """
    index = range(len(data.y_top)) if index is None else index
    Kt = len(data.top_names)
    X, y = [], []
    for w in index:
        ft, fb = data.feat_top[w], data.feat_bottom[w]
        T = len(ft)
        nf = np.zeros((2 * T, ft.shape[1] + fb.shape[1]))
        nf[:T, :ft.shape[1]] = ft
        nf[T:, ft.shape[1]:] = fb
        edges, etype = two_level_edges(T)
        X.append((nf, edges, np.eye(3)[etype]))
        y.append(np.concatenate([data.y_top[w], data.y_bottom[w] + Kt]).astype(np.int64))
    return X, y


def hide_labels(y, fraction, random_state=None):
    """Copies of label arrays with a ``fraction`` of the entries of each replaced by −1 (hidden).

    Each array hides ``round(fraction · n)`` entries chosen uniformly at random (per node, the
    partial-label setting of Tran et al. (2014)). ``fraction`` 0 returns plain copies.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"`fraction` must be in [0, 1]; got {fraction!r}")
    rng = check_random_state(random_state)
    out = []
    for a in y:
        a = np.array(a, dtype=np.int64, copy=True)
        k = int(round(fraction * len(a)))
        if k:
            a[rng.choice(len(a), size=k, replace=False)] = -1
        out.append(a)
    return out
