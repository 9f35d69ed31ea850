"""Lazy exports of a package: names that load their module on first use (``structlearn tag`` imports the CRF
package's feature model without its estimators, and ``import structlearn`` loads no estimator)."""
import importlib

__all__ = ["lazy_exports"]


def lazy_exports(package, table):
    """Module-level ``__getattr__`` and ``__dir__`` for ``package`` (its ``__name__``) that resolve each name
    of ``table`` ({name: module}) by importing the module on first use."""

    def __getattr__(name):
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(importlib.import_module(package))) | set(table))

    return __getattr__, __dir__
