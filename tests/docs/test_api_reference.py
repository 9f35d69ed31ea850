"""The API reference (docs/api/*.md) covers the public API, and docstrings render as written.

Read from the Markdown sources, without building the site (tests/docs/test_site_browser.py builds it).

**Public modules** (:data:`PUBLIC`): ``structlearn`` and its sub-modules that a user imports; their public
names are their ``__all__`` (``structlearn`` itself, lazy, has none: the names it exports, ``dir(structlearn)``
less modules and dunders). Every other sub-module of ``structlearn`` without a leading underscore is named in
:data:`INTERNAL` with the reason, so that a new sub-module is placed in one list or the other.

**Documented**: the public name ``M.N``, bound to the object ``O``, is documented when a page of docs/api/
holds

- a mkdocstrings directive ``::: path`` where ``path`` imports to ``O`` itself (any module path: a re-exported
  ``structlearn.io.read_fg`` is documented by ``::: structlearn.io.libdai.read_fg``), or
- a directive ``::: P`` of a module ``P`` whose ``__all__`` binds ``N`` to ``O``, rendered with its members:
  no ``members`` option, or a ``members`` list that names ``N`` (``members: false`` renders none), or,
- for data (an object that is neither a class, a function nor a module: ``TEMPLATES``,
  ``DURATION_FAMILIES``), an inline code span ```path``` whose ``path`` imports to ``O``; mkdocstrings shows
  no docstring of a constant, so the page says in prose what it holds.

Identity (``is``), not names, decides: ``structlearn.durations.Poisson`` and ``structlearn.emissions.Poisson``
are two classes, each needing its own directive.
"""
import ast
import importlib
import inspect
import pkgutil
import re

import pytest
import yaml

from tests.conftest import ROOT, require_module

API = ROOT / "docs" / "api"
SRC = ROOT / "src" / "structlearn"

PUBLIC = ["structlearn", "structlearn.crf", "structlearn.hsmm", "structlearn.hmm", "structlearn.hhmm",
          "structlearn.graph", "structlearn.durations", "structlearn.emissions", "structlearn.structures",
          "structlearn.io", "structlearn.metrics", "structlearn.datasets", "structlearn.plotting",
          "structlearn.distributed", "structlearn.torch"]
INTERNAL = {
    "structlearn.cli": "the `structlearn` command, documented by its --help and the crfsuite-cli guide",
    "structlearn.engine": "the kernels and structures behind structlearn.structures (its facade)",
    "structlearn.distributions": "the laws behind structlearn.durations and structlearn.emissions (facades)",
    "structlearn.learning": "EM driver, optimizers and estimator bases shared by the families",
    "structlearn.utils": "helpers of the package itself",
}
OPTIONAL = {"structlearn.torch": "torch"}      # modules needing an extra: skipped (failed under CI) without it


def _resolve(path):
    """The object the dotted ``path`` imports to, or None."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


def _directives():
    """(page, path, options) of every ``::: path`` directive of docs/api/*.md, options parsed from the
    indented YAML block under it."""
    out = []
    for page in sorted(API.glob("*.md")):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("::: "):
                continue
            block = []
            for nxt in lines[i + 1:]:
                if not nxt.startswith(" ") or not nxt.strip():
                    break
                block.append(nxt)
            options = (yaml.safe_load("\n".join(block)) or {}).get("options", {}) if block else {}
            out.append((page.name, line[4:].strip(), options or {}))
    return out


def _code_spans():
    """Every inline code span of docs/api/*.md that is a dotted path into structlearn."""
    spans = set()
    for page in API.glob("*.md"):
        spans.update(re.findall(r"`(structlearn(?:\.\w+)+)`", page.read_text()))
    return spans


def _public_names(module_name):
    module = importlib.import_module(module_name)
    if module_name == "structlearn":
        return [n for n in dir(module) if not n.startswith("_") and not inspect.ismodule(getattr(module, n))]
    return list(module.__all__)


def _documented():
    """Ids of the objects the API pages document (rules in the module docstring), and of those only
    mentioned in a code span."""
    rendered, mentioned = set(), set()
    for _page, path, options in _directives():
        obj = _resolve(path)
        assert obj is not None, f"docs/api/{_page}: `::: {path}` does not import"
        rendered.add(id(obj))
        members = options.get("members", True)
        if inspect.ismodule(obj) and members is not False:
            names = getattr(obj, "__all__", [])
            for name in names if members is True else [n for n in names if n in members]:
                rendered.add(id(getattr(obj, name)))
    for path in _code_spans():
        obj = _resolve(path)
        if obj is not None:
            mentioned.add(id(obj))
    return rendered, mentioned


def test_every_submodule_is_public_or_internal():
    import structlearn

    subs = {f"structlearn.{m.name}" for m in pkgutil.iter_modules(structlearn.__path__)
            if not m.name.startswith("_")}
    assert subs == (set(PUBLIC) | set(INTERNAL)) - {"structlearn"}


@pytest.mark.parametrize("module_name", PUBLIC)
def test_every_public_name_is_in_the_api_reference(module_name):
    if module_name in OPTIONAL:
        require_module(OPTIONAL[module_name])
    module = importlib.import_module(module_name)
    rendered, mentioned = _documented()
    missing = []
    for name in _public_names(module_name):
        obj = getattr(module, name)
        is_api = inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)
        if id(obj) not in rendered and (is_api or id(obj) not in mentioned):
            missing.append(f"{module_name}.{name}")
    assert not missing, ("not in docs/api/*.md (a `::: path` directive, or for data a `structlearn…` code "
                         "span): " + ", ".join(missing))


def test_every_directive_imports():
    for page, path, _options in _directives():
        assert path.startswith("structlearn"), (page, path)
        assert _resolve(path) is not None, f"docs/api/{page}: `::: {path}` does not import"


# -- docstrings render as written ----------------------------------------------------------------------

def _items_named_cost(doc):
    """Entries of the numpydoc sections of ``doc`` (griffe's parser, as mkdocstrings uses it) whose name or
    type begins with "Cost": a "Cost: …" paragraph left inside Returns or Raises, rendered as a returned
    value or an exception."""
    import griffe

    bad = []
    for section in griffe.Docstring(doc, parser="numpy").parse():
        for item in section.value if isinstance(section.value, list) else []:
            for text in (getattr(item, "name", None), getattr(item, "annotation", None)):
                if isinstance(text, str) and text.strip().startswith("Cost"):
                    bad.append(f"{section.kind.value}: {text.strip()[:60]}")
    return bad


def test_cost_notes_are_not_parsed_as_section_entries():
    """The house rule states a public docstring's cost: in its Notes section (or its description), never as a
    paragraph inside Returns / Raises, where griffe reads it as one more entry. Every docstring of the
    package's sources but those of engine/kernels (Numba kernels, outside the API reference)."""
    require_module("griffe")
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        if path.parent.name == "kernels":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and "Cost" in doc:
                    bad += [f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}: {b}"
                            for b in _items_named_cost(doc)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module_name", [m for m in PUBLIC if m not in OPTIONAL])
def test_public_docstrings_completed_at_import_keep_cost_out_of_sections(module_name):
    """The same on the docstrings as imported (some are completed at import time, e.g. the HMMs')."""
    require_module("griffe")
    module = importlib.import_module(module_name)
    bad = []
    for name in _public_names(module_name):
        obj = getattr(module, name)
        docs = [(name, inspect.getdoc(obj))]
        if inspect.isclass(obj):
            docs += [(f"{name}.{m}", inspect.getdoc(v)) for m, v in vars(obj).items() if not m.startswith("_")]
        bad += [f"{module_name}.{n}: {b}" for n, d in docs if d and "Cost" in d for b in _items_named_cost(d)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module_name", [m for m in PUBLIC if m not in OPTIONAL])
def test_parameters_sections_name_only_parameters(module_name):
    """Prose left after the Parameters entries ("X is (N, F) …") is read by griffe as more parameters: every
    entry of a public class's or function's Parameters section must name a parameter of its signature
    (functions taking ``**kwargs`` are not checked)."""
    griffe = require_module("griffe")
    module = importlib.import_module(module_name)
    bad = []
    for name in _public_names(module_name):
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not inspect.getdoc(obj):
            continue
        try:
            params = inspect.signature(obj).parameters
        except ValueError:          # an exception class: BaseException's C signature
            continue
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            continue
        for section in griffe.Docstring(inspect.getdoc(obj), parser="numpy").parse():
            if section.kind.value == "parameters":
                bad += [f"{module_name}.{name}: {p.name!r}" for p in section.value
                        if "," not in p.name and p.name.lstrip("*") not in params]
    assert not bad, "\n".join(bad)
