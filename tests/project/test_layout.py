"""Where each kind of code lives (docs/developing.md): Numba-compiled functions only in engine/kernels/ (and
the inlined semiring helpers in engine/semirings.py), scikit-learn estimators only in the model families'
packages (crf/, hsmm/, hmm/, hhmm/, graph/; their shared base in learning/training.py), tests in the folder
of the family they test, no source file over MAX_LINES lines. The import layers and the independence of the
families are checked by lint-imports (.importlinter)."""
import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[2] / "src" / "structlearn"
MAX_LINES = 800
FAMILIES = ("crf", "hsmm", "hmm", "hhmm", "graph")
TESTS = PKG.parents[1] / "tests"
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
    allowed = {PKG / "engine" / "semirings.py"}
    bad = [f"{_rel(p)}:{line}" for p in _sources()
           if PKG / "engine" / "kernels" not in p.parents and p not in allowed
           for line in _numba_compiler_uses(_tree(p))]
    assert not bad, ("numba njit/jit/vectorize outside src/structlearn/engine/kernels/ (move the kernel there):\n"
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


def test_estimators_only_in_family_packages():
    shared_base = PKG / "learning" / "training.py"
    bad = [f"{_rel(p)}:{line}: class {name}" for p, line, name in _estimator_classes()
           if p != shared_base and not any(PKG / fam in p.parents for fam in FAMILIES)]
    assert not bad, ("scikit-learn estimators outside the family packages " + ", ".join(FAMILIES)
                     + ":\n" + "\n".join(bad))


def test_tests_follow_the_families():
    """Tests of a family's estimators live in tests/<family>/ (tests/api/ holds those of every family);
    no test folder is named after a layer that is gone."""
    gone = {"estimators", "models", "structures", "kernels"}
    assert not gone & {p.name for p in TESTS.iterdir() if p.is_dir()}
    for fam in FAMILIES + ("engine", "distributions"):
        assert any((TESTS / fam).glob("test_*.py")), f"tests/{fam}/ has no tests"


def test_estimators_are_found():
    """The check above sees the estimators that are there (it would pass vacuously otherwise)."""
    names = {name for _, _, name in _estimator_classes()}
    assert {"LinearChainCRF", "SemiMarkovCRF", "TreeCRF", "GraphCRF"} <= names


def test_no_source_file_over_max_lines():
    sizes = {_rel(p): len(p.read_text(encoding="utf-8").splitlines()) for p in _sources()}
    bad = [f"{name}: {n} lines" for name, n in sorted(sizes.items(), key=lambda kv: -kv[1]) if n > MAX_LINES]
    assert not bad, f"source files over {MAX_LINES} lines (split them):\n" + "\n".join(bad)
