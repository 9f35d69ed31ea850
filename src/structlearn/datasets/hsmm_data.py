"""Loaders of two real data sets for the hidden semi-Markov models (issue 13).

- :func:`load_reprocows` — the example data of the R package mhsmm (O'Connell & Højsgaard 2011,
  J. Stat. Softw. 39(4)): hourly pedometer activity and sparse milk progesterone of 7 dairy cows from
  calving on, the days of artificial insemination (known oestrus events) and 73 observed post-partum
  anoestrus durations (``mhsmm_reprocows``; source: Danish Cattle Research Centre).
- :func:`load_ordonez` — the ADL recognition data of Ordóñez, de Toledo & Sanchis (2013, Sensors 13,
  5460–5477; UCI "Activities of Daily Living (ADLs) Recognition Using Binary Sensors"): binary home
  sensor events and annotated activity segments of two homes, cut into time slices
  (``ordonez_adl``).

Both return plain NumPy arrays in a :class:`sklearn.utils.Bunch`; the files are found with
:func:`structlearn.datasets.get_data_path` (``data_home``, then ``$STRUCTLEARN_DATA``, then
``../shared/data``). A missing data set raises ``FileNotFoundError`` naming it and the places searched.
"""
import csv
import gzip

import numpy as np
from sklearn.utils import Bunch

from ._base import get_data_path

__all__ = ["load_reprocows", "load_ordonez", "ORDONEZ_ACTIVITIES"]

#: The ADL labels of the Ordóñez data in the order of its description files; :func:`load_ordonez`
#: keeps those that occur in the home (house A has no "Dinner"), after "Idle" (unlabelled time).
ORDONEZ_ACTIVITIES = ("Leaving", "Toileting", "Showering", "Sleeping", "Breakfast", "Lunch", "Dinner",
                      "Snack", "Spare_Time/TV", "Grooming")

_DAY = 86400


def _folder(name, data_home, files):
    path = get_data_path(name, data_home)
    where = (f"data_home={str(data_home)!r}, " if data_home is not None else "") + \
        "$STRUCTLEARN_DATA and ../shared/data"
    if path is None:
        raise FileNotFoundError(f"data set {name!r} not found (looked in {where}); pass `data_home` or "
                                f"set STRUCTLEARN_DATA to the folder that holds {name}/")
    missing = [f for f in files if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(f"data set {name!r} at {path} lacks {', '.join(missing)}")
    return path


def _float(v):
    return np.nan if v in ("NA", "") else float(v)


# --------------------------------------------------------------------------------------------------
# mhsmm reprocows
# --------------------------------------------------------------------------------------------------
def load_reprocows(data_home=None):
    """The mhsmm reproductive data of 7 dairy cows (``reprocows``, ``reproai``, ``reproppa``).

    Parameters
    ----------
    data_home : str or path-like, optional
        Folder holding ``mhsmm_reprocows/`` (default: :func:`~structlearn.datasets.get_data_path`).

    Returns
    -------
    Bunch
        Per hour since calving, the 7 cows' rows packed one after the other (N = 13,040 rows, cow c has
        ``lengths[c]`` rows):

        - ``activity`` (N,) float64 — relative pedometer activity index, NaN = missing (1,855 rows);
        - ``progesterone`` (N,) float64 — milk progesterone (ng/L), NaN except at 207 samplings;
        - ``days`` (N,) float64 — days from calving (0, 1/24, 2/24, ...);
        - ``cow`` (N,) int64 — the cow id of each row; ``ids`` (7,) int64 and ``lengths`` (7,) int64;
        - ``ai_cow`` (12,) int64, ``ai_day`` (12,) float64 — the insemination days (only the day is
          known: always x.5, midday); ``ai_row`` (12,) int64 — the packed row at that time;
        - ``ppa`` (73,) float64 — observed post-partum anoestrus durations (days) of 73 other cows;
        - ``descr`` str.

    Raises
    ------
    FileNotFoundError
        The data set or one of its CSV files is missing.
    ValueError
        An insemination time that is not on a cow's hourly grid.
    """
    path = _folder("mhsmm_reprocows", data_home, ("reprocows.csv.gz", "reproai.csv", "reproppa.csv"))
    with gzip.open(path / "reprocows.csv.gz", "rt", encoding="ascii", newline="") as fh:
        rows = list(csv.reader(fh))
    head, rows = rows[0], rows[1:]
    if head != ["id", "days.from.calving", "activity", "progesterone"]:
        raise ValueError(f"reprocows.csv: unexpected header {head}")
    cow = np.array([int(r[0]) for r in rows], dtype=np.int64)
    days = np.array([float(r[1]) for r in rows])
    activity = np.array([_float(r[2]) for r in rows])
    progesterone = np.array([_float(r[3]) for r in rows])
    ids, first, lengths = np.unique(cow, return_index=True, return_counts=True)
    offsets = np.r_[0, np.cumsum(lengths)]
    with open(path / "reproai.csv", encoding="ascii", newline="") as fh:
        ai = list(csv.reader(fh))[1:]
    ai_cow = np.array([int(r[0]) for r in ai], dtype=np.int64)
    ai_day = np.array([float(r[1]) for r in ai])
    ai_row = np.empty(ai_cow.size, dtype=np.int64)
    for i, (c, d) in enumerate(zip(ai_cow, ai_day)):
        b = int(np.searchsorted(ids, c))
        local = int(round(d * 24))
        if b >= ids.size or ids[b] != c or not 0 <= local < lengths[b] or \
                abs(days[offsets[b] + local] - d) > 1e-6:
            raise ValueError(f"reproai row {i}: cow {c} day {d} is not on that cow's hourly grid")
        ai_row[i] = offsets[b] + local
    with open(path / "reproppa.csv", encoding="ascii", newline="") as fh:
        ppa = np.array([float(r[0]) for r in list(csv.reader(fh))[1:]])
    return Bunch(activity=activity, progesterone=progesterone, days=days, cow=cow, ids=ids,
                 lengths=lengths.astype(np.int64), ai_cow=ai_cow, ai_day=ai_day, ai_row=ai_row, ppa=ppa,
                 descr="mhsmm reprocows/reproai/reproppa (O'Connell & Højsgaard 2011; Danish Cattle "
                       "Research Centre): hourly activity and progesterone of 7 dairy cows from calving")


# --------------------------------------------------------------------------------------------------
# Ordóñez ADL
# --------------------------------------------------------------------------------------------------
def _read_table(path, n_fields):
    """Rows of an Ordóñez text file: two header lines, then TAB-separated fields padded with extra TABs
    (and sometimes a space): split on TAB, strip, drop empty fields."""
    out = []
    with open(path, encoding="latin-1") as fh:
        for i, line in enumerate(fh):
            if i < 2:
                continue
            f = [x.strip() for x in line.split("\t") if x.strip()]
            if not f:
                continue
            if len(f) != n_fields:
                raise ValueError(f"{path.name} line {i + 1}: expected {n_fields} fields, got {f}")
            out.append(f)
    return out


def _times(values):
    return np.array([v.replace(" ", "T") for v in values], dtype="datetime64[s]")


def load_ordonez(home="A", slice_seconds=60, data_home=None, label_rule="overlap"):
    """Ordóñez et al. (2013) ADL data of one home, as time slices labelled with the activity.

    Time is cut into slices of ``slice_seconds`` on a grid anchored at midnight, from the slice of the
    first annotation to the slice of the last one, and then into days at midnight (a first or last
    piece shorter than 12 hours is joined to its neighbour: home A gives 14 sequences, B 21 — the
    numbers of labelled days of the description files). With ``label_rule="overlap"`` a slice's label
    is the activity whose annotation overlaps it (a later-starting annotation overrides an earlier one:
    nested or overlapping labels, 2 in A and 23 in B; so an activity of a few seconds still labels its
    slice); with ``"majority"`` it is the label (with the same overrides, "Idle" included) of most of
    the slice's seconds — the rule for coarse slices. Unlabelled time is "Idle" (label 0).

    Data fix: 3 annotations of home A end before they start (a mistyped end, e.g. ``2011-12-02 12:20:41
    -> 2011-12-01 10:20:59 Grooming``); their end is set to one second before the next annotation
    starts (``fixed_rows``).

    Parameters
    ----------
    home : {"A", "B"}
    slice_seconds : int, default 60
        Slice length; must divide 86,400 (a day).
    data_home : str or path-like, optional
        Folder holding ``ordonez_adl/``.
    label_rule : {"overlap", "majority"}, default "overlap"
        How an annotation labels the slices it overlaps (see above).

    Returns
    -------
    Bunch
        Per slice (N slices, ``lengths`` per day, S sensors, K activities incl. "Idle"):

        - ``labels`` (N,) int64 — activity index into ``activity_names`` (0 = "Idle");
        - ``active`` (N, S) bool — the sensor was on at some moment of the slice ("raw" representation
          of van Kasteren et al. 2008);
        - ``fired`` (N, S) bool — the sensor switched on inside the slice ("change point");
        - ``last`` (N,) int64 — the sensor that switched on most recently up to the end of the slice,
          -1 before the first event ("last");
        - ``slice_start`` (N,) datetime64[s]; ``lengths`` (n_days,) int64; ``day`` (n_days,)
          datetime64[D] (the calendar day of each sequence's first slice);
        - ``activity_names``, ``sensor_names`` lists of str;
        - the raw tables: ``activity_start``, ``activity_end`` (n_annotations,) datetime64[s],
          ``activity`` (n_annotations,) int64 (index into ``activity_names``); ``sensor_start``,
          ``sensor_end`` (n_events,) datetime64[s], ``sensor`` (n_events,) int64; ``fixed_rows`` list of
          the annotation rows whose end was repaired;
        - ``slice_seconds`` int, ``home`` str, ``descr`` str.

    Raises
    ------
    ValueError
        ``home`` not "A"/"B", ``slice_seconds`` not a positive divisor of 86,400, or an unknown
        ``label_rule``.
    FileNotFoundError
        The data set or one of the home's files is missing.
    """
    if home not in ("A", "B"):
        raise ValueError(f"`home` must be 'A' or 'B'; got {home!r}")
    if isinstance(slice_seconds, bool) or not isinstance(slice_seconds, (int, np.integer)) or \
            slice_seconds < 1 or _DAY % slice_seconds:
        raise ValueError(f"`slice_seconds` must be a positive integer dividing 86400 (a day); got "
                         f"{slice_seconds!r}")
    if label_rule not in ("overlap", "majority"):
        raise ValueError(f"`label_rule` must be 'overlap' or 'majority'; got {label_rule!r}")
    dt = int(slice_seconds)
    files = (f"Ordonez{home}_ADLs.txt", f"Ordonez{home}_Sensors.txt")
    path = _folder("ordonez_adl", data_home, files)
    adl = _read_table(path / files[0], 3)
    sen = _read_table(path / files[1], 5)

    a_start, a_end = _times([r[0] for r in adl]), _times([r[1] for r in adl])
    fixed = [int(i) for i in np.flatnonzero(a_end < a_start)]
    for i in fixed:
        nxt = a_start[i + 1:][a_start[i + 1:] > a_start[i]]
        a_end[i] = (nxt.min() - np.timedelta64(1, "s")) if nxt.size else a_start[i]
    present = {r[2] for r in adl}
    unknown = present - set(ORDONEZ_ACTIVITIES)
    if unknown:
        raise ValueError(f"{files[0]}: unknown activities {sorted(unknown)}")
    activity_names = ["Idle"] + [a for a in ORDONEZ_ACTIVITIES if a in present]
    act = np.array([activity_names.index(r[2]) for r in adl], dtype=np.int64)

    places = {}
    for r in sen:
        places.setdefault(r[2], set()).add(r[4])
    keys = sorted({(r[2], r[4]) for r in sen})
    sensor_names = [loc if len(places[loc]) == 1 else f"{loc} ({place})" for loc, place in keys]
    s_start, s_end = _times([r[0] for r in sen]), _times([r[1] for r in sen])
    sensor = np.array([keys.index((r[2], r[4])) for r in sen], dtype=np.int64)

    # the slice grid: slice k covers [m0 + k dt, m0 + (k + 1) dt), m0 the first annotation's midnight
    m0 = a_start.min().astype("datetime64[D]").astype("datetime64[s]")

    def index(t):
        return ((t - m0).astype(np.int64) // dt).astype(np.int64)

    k0, k1 = int(index(a_start).min()), int(index(a_end).max())
    per_day = _DAY // dt
    cuts = [k0] + [k for k in range((k0 // per_day + 1) * per_day, k1 + 1, per_day)] + [k1 + 1]
    half = per_day // 2
    if len(cuts) > 2 and cuts[1] - cuts[0] < half:
        del cuts[1]
    if len(cuts) > 2 and cuts[-1] - cuts[-2] < half:
        del cuts[-2]
    n = k1 + 1 - k0
    labels = np.zeros(n, dtype=np.int64)
    if label_rule == "overlap":
        for i in np.argsort(a_start, kind="stable"):
            labels[index(a_start[i]) - k0:index(a_end[i]) - k0 + 1] = act[i]
    else:  # the label of each second (later-starting annotations override), then the slice's majority
        t0 = m0 + np.timedelta64(k0 * dt, "s")
        second = np.zeros(n * dt, dtype=np.int64)
        for i in np.argsort(a_start, kind="stable"):
            second[(a_start[i] - t0).astype(np.int64):(a_end[i] - t0).astype(np.int64) + 1] = act[i]
        K = len(activity_names)
        counts = np.zeros((n, K), dtype=np.int64)
        per_slice = second.reshape(n, dt)
        for k in range(K):
            counts[:, k] = (per_slice == k).sum(axis=1)
        labels = np.argmax(counts, axis=1).astype(np.int64)
    S = len(sensor_names)
    active = np.zeros((n, S), dtype=bool)
    fired = np.zeros((n, S), dtype=bool)
    lo, hi = index(s_start) - k0, index(s_end) - k0
    for s, a, b in zip(sensor, lo, hi):
        a_, b_ = max(a, 0), min(b, n - 1)
        if a_ <= b_:
            active[a_:b_ + 1, s] = True
        if 0 <= a < n:
            fired[a, s] = True
    order = np.argsort(s_start, kind="stable")
    slice_end = m0 + ((np.arange(n) + k0 + 1) * dt).astype("timedelta64[s]")
    j = np.searchsorted(s_start[order], slice_end, side="left") - 1  # switched on before the slice end
    last = np.where(j >= 0, sensor[order][np.maximum(j, 0)], -1).astype(np.int64)
    slice_start = m0 + ((np.arange(n) + k0) * dt).astype("timedelta64[s]")
    lengths = np.diff(np.array(cuts) - k0).astype(np.int64)
    day = slice_start[np.array(cuts[:-1]) - k0].astype("datetime64[D]")
    return Bunch(labels=labels, active=active, fired=fired, last=last, slice_start=slice_start,
                 lengths=lengths, day=day, activity_names=activity_names, sensor_names=sensor_names,
                 activity_start=a_start, activity_end=a_end, activity=act, sensor_start=s_start,
                 sensor_end=s_end, sensor=sensor, fixed_rows=fixed, slice_seconds=dt, home=home,
                 descr=f"Ordóñez et al. (2013) ADLs, home {home}: {len(adl)} annotations, {len(sen)} "
                       f"sensor events, {lengths.size} days of {dt}-s slices")
