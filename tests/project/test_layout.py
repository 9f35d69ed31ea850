"""Where each kind of code lives (docs/developing.md): Numba-compiled functions only in kernels/ (and the
inlined semiring helpers in semirings.py), scikit-learn estimators only in estimators/, no source file
over MAX_LINES lines. The import layers are checked by lint-imports (.importlinter)."""
import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[2] / "src" / "structlearn"
MAX_LINES = 800
NUMBA_COMPILERS = {"njit", "jit", "vectorize", "guvectorize", "generated_jit", "cfunc", "stencil"}


def _sources():
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(path):
    return path.relative_to(PKG.parent).as_posix()


def _tree(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _numba_compiler_uses(tree):
    """Line numbers where a numba compiler (njit, jit, vectorize, ...) is imported or used (a decorator,
    a call, ``numba.njit``)."""
    local = set()  # names the module binds to numba compilers
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
            for alias in node.names:
                if alias.name in NUMBA_COMPILERS:
                    local.add(alias.asname or alias.name)
                    lines.add(node.lineno)
        elif (isinstance(node, ast.Attribute) and node.attr in NUMBA_COMPILERS
              and isinstance(node.value, ast.Name) and node.value.id == "numba"):
            lines.add(node.lineno)
    lines.update(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in local)
    return sorted(lines)


def test_numba_compiled_code_only_in_kernels():
    allowed = {PKG / "semirings.py"}
    bad = [f"{_rel(p)}:{line}" for p in _sources()
           if PKG / "kernels" not in p.parents and p not in allowed
           for line in _numba_compiler_uses(_tree(p))]
    assert not bad, ("numba njit/jit/vectorize outside src/structlearn/kernels/ (move the kernel there):\n"
                     + "\n".join(bad))


def _estimator_classes():
    """(path, line, name) of every class that derives, directly or through classes of the package,
    from scikit-learn's BaseEstimator (bases resolved by their last name)."""
    classes = []
    for p in _sources():
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.ClassDef):
                bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None) for b in node.bases}
                classes.append((p, node.lineno, node.name, bases))
    estimators = {"BaseEstimator"}
    grew = True
    while grew:
        grew = False
        for _, _, name, bases in classes:
            if name not in estimators and bases & estimators:
                estimators.add(name)
                grew = True
    return [(p, line, name) for p, line, name, bases in classes if bases & estimators]


def test_estimators_only_in_estimators():
    bad = [f"{_rel(p)}:{line}: class {name}" for p, line, name in _estimator_classes()
           if PKG / "estimators" not in p.parents]
    assert not bad, "scikit-learn estimators outside src/structlearn/estimators/:\n" + "\n".join(bad)


def test_estimators_are_found():
    """The check above sees the estimators that are there (it would pass vacuously otherwise)."""
    names = {name for _, _, name in _estimator_classes()}
    assert {"LinearChainCRF", "SemiMarkovCRF", "TreeCRF", "GraphCRF"} <= names


def test_no_source_file_over_max_lines():
    sizes = {_rel(p): len(p.read_text(encoding="utf-8").splitlines()) for p in _sources()}
    bad = [f"{name}: {n} lines" for name, n in sorted(sizes.items(), key=lambda kv: -kv[1]) if n > MAX_LINES]
    assert not bad, f"source files over {MAX_LINES} lines (split them):\n" + "\n".join(bad)
