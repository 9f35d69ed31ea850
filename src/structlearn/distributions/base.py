"""The parameter bookkeeping shared by the emission and duration families.

A family names its parameter arrays in ``_param_names`` (the first one has one row per state) and its
other constructor settings in ``_config()``; this base gives it ``n_states``, a ``repr`` and the
model-file protocol ``get_state()`` / ``set_state(arrays)``.
"""
import copy

import numpy as np

__all__ = ["Distribution", "check_stochastic_rows", "family_to_file", "families_from_file",
           "make_family"]


def check_stochastic_rows(p, name, what=""):
    """``ValueError`` unless the 2-d array ``p`` is finite, non-negative, with rows summing to one."""
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"`{name}` must be finite and non-negative{what}")
    s = p.sum(axis=1)
    if not np.allclose(s, 1.0, atol=1e-8):
        j = int(np.argmax(np.abs(s - 1)))
        raise ValueError(f"`{name}` rows must sum to 1; row {j} sums to {s[j]:.6g}")


class Distribution:
    """Base of :class:`~structlearn.distributions.emissions.EmissionDistribution` and
    :class:`~structlearn.distributions.durations.DurationDistribution`."""

    _param_names = ()

    @property
    def n_states(self):
        """Number of states K, or ``None`` before the parameters are set."""
        v = getattr(self, self._param_names[0])
        return None if v is None else int(np.shape(v)[0])

    def _is_set(self):
        return all(getattr(self, n) is not None for n in self._param_names)

    def _require(self):
        if not self._is_set():
            raise ValueError(f"{type(self).__name__} parameters are not set; pass them to the "
                             f"constructor or fit a model first")

    def __repr__(self):
        parts = [f"{k}={v!r}" for k, v in self._config().items()]
        for n in self._param_names:
            v = getattr(self, n)
            if v is not None:
                parts.append(f"{n}={np.array2string(np.asarray(v), precision=4, threshold=12)}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def _config(self):
        """JSON-able constructor settings other than the parameter arrays."""
        return {}

    def get_state(self):
        """(arrays, config) for model files: the parameter arrays by name and :meth:`_config`."""
        self._require()
        return ({n: np.asarray(getattr(self, n), dtype=np.float64) for n in self._param_names},
                self._config())

    def set_state(self, arrays):
        """Set the parameter arrays from a model file (validated); returns self."""
        for n in self._param_names:
            setattr(self, n, np.asarray(arrays[n], dtype=np.float64).copy())
        self._validate()
        return self

    def _validate(self):  # pragma: no cover - overridden
        pass


def _module_tuple(module):
    return tuple(module) if isinstance(module, (tuple, list)) else (module,)


def family_to_file(obj, module, what):
    """(family name, arrays prefixed ``"<what>."``, config) of a family object for a model file.

    ``module``: the module of structlearn's families of this role, or a sequence of such modules (e.g.
    :mod:`structlearn.distributions.emissions` and :mod:`structlearn.distributions.emissions.hmm`); the name written
    is the class name, which :func:`families_from_file` looks up in the same modules.

    Raises ``ValueError`` for an object whose class is not one of those modules' families (model files
    only name structlearn's families, so loading never executes code).
    """
    name = type(obj).__name__
    if not any(getattr(m, name, None) is type(obj) for m in _module_tuple(module)):
        raise ValueError(f"cannot save a model with a custom {what} object of type "
                         f"{type(obj).__qualname__}: model files only name structlearn's families "
                         f"(loading never executes code)")
    arrays, config = obj.get_state()
    return name, {f"{what}.{k}": v for k, v in arrays.items()}, config


def families_from_file(meta, arrays, families):
    """The family objects written by :func:`family_to_file`, by role.

    ``families`` maps a role (``"duration"``, ``"emission"``) to ``(module or sequence of modules, base
    class)``; ``meta`` holds ``"<role>_family"`` and ``"<role>_config"``, ``arrays`` the arrays prefixed
    ``"<role>."``. The family is the first class of that name in the modules; a role whose family is
    not a subclass of its base there maps to ``None`` (nothing outside those modules is ever built).
    """
    out = {}
    for what, (module, base) in families.items():
        name = str(meta.get(f"{what}_family"))
        found = (getattr(m, name, None) for m in _module_tuple(module))
        cls = next((c for c in found if isinstance(c, type)), None)
        if not (cls is not None and issubclass(cls, base)):
            out[what] = None
            continue
        prefix = f"{what}."
        out[what] = cls(**(meta.get(f"{what}_config") or {})).set_state(
            {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)})
    return out


def make_family(spec, families, what, methods):
    """A fresh object from a family name of ``families`` (case-insensitive), or a deep copy of an object
    that has the protocol ``methods`` of :mod:`structlearn.models.<what>s`.

    Raises ``ValueError`` for an unknown name or an object lacking a method.
    """
    if isinstance(spec, str):
        try:
            return families[spec.lower()]()
        except KeyError:
            article = "an" if what[0] in "aeiou" else "a"
            raise ValueError(f"`{what}` must be one of {sorted(families)} or {article} {what} "
                             f"object; got {spec!r}") from None
    for attr in methods:
        if not hasattr(spec, attr):
            raise ValueError(f"`{what}` object {spec!r} lacks the method `{attr}` of the {what} "
                             f"protocol (see structlearn.models.{what}s)")
    return copy.deepcopy(spec)
