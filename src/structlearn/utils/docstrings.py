"""Docstrings written once: a part several docstrings share stands in each of them as a line ``{name}``."""
import re
import textwrap

__all__ = ["fill_docstring"]


def fill_docstring(obj, **parts):
    """Write each part in place of the line ``{name}`` of ``obj``'s docstring, indented as that line.

    Parameters
    ----------
    obj : class or function
        Its ``__doc__`` is completed in place.
    **parts : str
        The text of each part, without indentation (its later lines are indented as its first).

    Returns
    -------
    obj
        ``obj`` itself, so that ``fill_docstring`` can end a class decorator.
    """
    for name, text in parts.items():
        obj.__doc__ = re.sub(r"^( *)\{%s\}$" % re.escape(name), lambda m: textwrap.indent(text, m.group(1)),
                             obj.__doc__, flags=re.M)
    return obj
