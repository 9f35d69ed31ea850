"""The brute-force oracles in tests/oracles/ import nothing from structlearn (nor from the tests that use
them), so a bug in the package cannot hide in its own oracle."""
import ast
import pathlib

import pytest

ORACLES = pathlib.Path(__file__).resolve().parents[1] / "oracles"
ALLOWED = {"itertools", "math", "numpy"}  # plus relative imports of sibling oracles


def _imports(path):
    """(line, module) of every import in one file, relative ones as '.name'."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, "." * node.level + (node.module or "")


@pytest.mark.parametrize("path", sorted(ORACLES.glob("*.py")), ids=lambda p: p.name)
def test_oracle_imports_only_the_standard_library_and_numpy(path):
    bad = [f"{path.name}:{line}: {mod}" for line, mod in _imports(path)
           if not mod.startswith(".") and mod.split(".")[0] not in ALLOWED]
    assert not bad, "oracles may import only " + ", ".join(sorted(ALLOWED)) + " and each other:\n" + "\n".join(bad)


def test_no_oracle_reaches_structlearn_dynamically():
    """No importlib / __import__, and the package's name in no string but a docstring."""
    for path in sorted(ORACLES.glob("*.py")):
        tree = ast.parse(path.read_text())
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in ("__import__", "importlib"):
                pytest.fail(f"{path.name}:{node.lineno}: dynamic import")
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                    and "structlearn" in node.value):
                pytest.fail(f"{path.name}:{node.lineno}: 'structlearn' in a string")
