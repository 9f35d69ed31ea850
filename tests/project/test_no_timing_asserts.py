"""Speed is measured in benchmarks/, never asserted in tests (issue 21): no assert in tests/ compares a
name that holds a clock reading (time.perf_counter, time.time, time.monotonic, their _ns forms) or a
difference of clock readings."""
import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]
CLOCKS = {"perf_counter", "time", "monotonic", "process_time",
          "perf_counter_ns", "time_ns", "monotonic_ns", "process_time_ns"}


def _reads_clock(node, timed):
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            base = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
            if name in CLOCKS and base in (None, "time"):
                return True
        if isinstance(sub, ast.Name) and sub.id in timed:
            return True
    return False


def timing_asserts(source):
    """Line numbers of asserts that compare a clock-derived name."""
    tree = ast.parse(source)
    timed = set()
    changed = True
    while changed:  # propagate through chains of assignments (t0 -> elapsed -> rate)
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _reads_clock(node.value, timed):
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name) and n.id not in timed:
                                timed.add(n.id)
                                changed = True
    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)
                  and any(isinstance(c, ast.Compare) and _reads_clock(c, timed) for c in ast.walk(node.test)))


def test_the_checker_finds_a_timing_assert():
    src = "import time\nt0 = time.perf_counter()\nf()\nel = time.perf_counter() - t0\nassert el < 8.0\n"
    assert timing_asserts(src) == [5]
    assert timing_asserts("x = f()\nassert x < 8.0\n") == []


def test_no_test_asserts_a_time():
    found = {p.relative_to(TESTS).as_posix(): lines for p in sorted(TESTS.rglob("*.py"))
             if (lines := timing_asserts(p.read_text(encoding="utf-8")))}
    assert not found, f"tests assert a time (measure it in benchmarks/ instead): {found}"
