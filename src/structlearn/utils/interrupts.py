"""Ctrl-C seen through C code: a ``KeyboardInterrupt`` raised while Numba (or another C extension) calls
back into Python can come out as a ``SystemError`` ("… returned a result with an exception set") whose
cause is the interrupt. :func:`as_interrupt` gives the interrupt back, so that callers see a
``KeyboardInterrupt`` (and ``structlearn`` exits 130) instead of an internal error."""

__all__ = ["as_interrupt"]


def as_interrupt(exc):
    """``exc`` itself, or a new ``KeyboardInterrupt`` (caused by ``exc``) when ``exc`` is a ``SystemError``
    whose chain of causes / contexts holds a ``KeyboardInterrupt``."""
    if not isinstance(exc, SystemError):
        return exc
    seen, link = set(), exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            interrupt = KeyboardInterrupt()
            interrupt.__cause__ = exc
            return interrupt
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return exc
