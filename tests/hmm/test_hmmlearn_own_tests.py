"""hmmlearn's own test suite run against structlearn.hmm, only the import of the classes changed.

The test files of the installed hmmlearn (``hmmlearn/tests``) are copied into a temporary package and
``from hmmlearn import hmm`` / ``from .. import hmm`` / ``from ..hmm import GMMHMM`` are rewritten to
structlearn.hmm. hmmlearn's test helpers stay hmmlearn's: ``hmmlearn.utils.normalize`` and
``hmmlearn.base.DECODER_ALGORITHMS`` (used by the helpers of ``__init__.py``) and
``hmmlearn.base.ConvergenceMonitor`` (the base class of a custom monitor that a test puts in ``monitor_``:
the monitor API under test, not a class under test). The suite runs in a subprocess with hmmlearn's
seed fixed (``HMMLEARN_SEED``); at least 95 % must pass and the failing tests must be exactly
``EXPECTED_FAILURES`` (the differences of docs/guides/hmmlearn.md), so a regression or a new pass shows.
"""
import os
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import require_module

FILES = ["__init__.py", "conftest.py", "test_gaussian_hmm.py", "test_gmm_hmm.py", "test_gmm_hmm_new.py",
         "test_gmm_hmm_multisequence.py", "test_categorical_hmm.py", "test_multinomial_hmm.py",
         "test_poisson_hmm.py"]
REWRITES = [(r"^from hmmlearn import hmm$", "from structlearn import hmm"),
            (r"^from \.\. import hmm$", "from structlearn import hmm"),
            (r"^from \.\.hmm import GMMHMM$", "from structlearn.hmm import GMMHMM")]

_CAT, _GAUSS, _MULTI = "test_categorical_hmm.TestCategoricalHMM", "test_gaussian_hmm.TestGaussianHMMWith", \
    "test_multinomial_hmm.TestMultinomialHMM"
#: failing test (module.Class::name[param]) -> why (see docs/guides/hmmlearn.md, "What differs")
EXPECTED_FAILURES = {
    **{f"{_CAT}::test_n_features[{i}]": "fit never changes the argument n_features (the fitted alphabet is "
       "n_features_)" for i in ("scaling", "log")},
    **{f"{_GAUSS}SphericalCovars::test_issue_385[{i}]": "covars_ set in a shape that is not the compact form "
       "of covariance_type ((2, 1, 1, 1) for spherical) is refused; n_features is read from the means"
       for i in ("scaling", "log")},
    f"{_GAUSS}SphericalCovars::test_underflow_from_scaling[scaling]": "implementation='scaling' runs the "
    "exact log-space engine: no underflow, so no ValueError",
    **{f"{_MULTI}::test_sample[{i}]": "sampling with n_trials=None uses the training rows' common total "
       "instead of raising" for i in ("scaling", "log")},
    **{f"{_MULTI}::test__check_and_set_multinomial_n_features_n_trials[{i}]": "fit never changes the "
       "argument n_trials (hmmlearn's check sets it)" for i in ("scaling", "log")},
}


def _copy_suite(hmmlearn_tests, dest):
    pkg = dest / "hmmlearn_tests"
    pkg.mkdir()
    for name in FILES:
        text = (hmmlearn_tests / name).read_text()
        for pattern, repl in REWRITES:
            text = re.sub(pattern, repl, text, flags=re.M)
        (pkg / name).write_text(text)
    return pkg


def _results(junit):
    """{test id: "passed" | "failed" | "skipped"} (xfail/xpass count as skipped and passed)."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tid = f"{case.get('classname').split('.', 1)[1]}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            out[tid] = "failed"
        elif case.find("skipped") is not None:
            out[tid] = "skipped"
        else:
            out[tid] = "passed"
    return out


@pytest.mark.slow
def test_hmmlearn_own_tests_pass_on_structlearn(tmp_path):
    hmmlearn = require_module("hmmlearn")
    src = pathlib.Path(hmmlearn.__file__).parent / "tests"
    if not src.is_dir():  # pragma: no cover - a wheel without its tests
        pytest.skip(f"hmmlearn {hmmlearn.__version__} ships no tests folder")
    _copy_suite(src, tmp_path)
    junit = tmp_path / "junit.xml"
    env = dict(os.environ, HMMLEARN_SEED="0")  # hmmlearn's conftest draws a seed per run otherwise
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           "--rootdir", str(tmp_path), f"--junitxml={junit}", "hmmlearn_tests"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert junit.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    results = _results(junit)
    ran = {t: r for t, r in results.items() if r != "skipped"}
    failed = {t for t, r in ran.items() if r == "failed"}
    share = 1 - len(failed) / len(ran)
    print(f"hmmlearn's own tests on structlearn.hmm: {len(ran) - len(failed)} of {len(ran)} pass")
    assert share >= 0.95, (share, sorted(failed))
    assert failed == set(EXPECTED_FAILURES), (
        f"newly failing: {sorted(failed - set(EXPECTED_FAILURES))}; "
        f"now passing: {sorted(set(EXPECTED_FAILURES) - failed)}")
