#!/usr/bin/env python3
"""Tests of conformance.py's parser on a made-up run_tests.py -v log: results on the header
line, after a docstring line, after the test's own output, skips with either quote, failures and
errors, a log without results, and two logs side by side."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance  # noqa: E402

LOG = """test_a (tests.test_x.A.test_a) ... ok
test_b (tests.test_x.A.test_b)
Docstring of b, with ... dots in it ... skipped 'Create UD QP without attrs is not supported'
test_c (tests.test_x.A.test_c) ... is_fork_initialized() = 0
ok
test_d (tests.test_y.B.test_d) ... skipped "Device hematite0 doesn't have net interface"
test_e (tests.test_y.B.test_e) ... FAIL
test_f (tests.test_y.B.test_f)
Docstring of f ... ERROR

======================================================================
FAIL: test_e (tests.test_y.B.test_e)
----------------------------------------------------------------------
Ran 6 tests in 1.000s

FAILED (failures=1, errors=1, skipped=2)
"""


def main():
    rows = conformance.parse(LOG)
    want = [
        ("tests.test_x.A.test_a", "pass", ""),
        ("tests.test_x.A.test_b", "skip", "Create UD QP without attrs is not supported"),
        ("tests.test_x.A.test_c", "pass", ""),
        ("tests.test_y.B.test_d", "skip", "Device hematite0 doesn't have net interface"),
        ("tests.test_y.B.test_e", "FAIL", ""),
        ("tests.test_y.B.test_f", "ERROR", ""),
    ]
    assert rows == want, rows
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "log")
        with open(p, "w") as f:
            f.write(LOG)
        out = subprocess.run([sys.executable, conformance.__file__, p, "t"], capture_output=True, text=True)
        assert out.returncode == 0 and "t: 6 tests, 2 passed, 2 skipped, 1 failed, 1 errors" in out.stdout, out
        # two columns: the second log passes test_b, fails test_a and lacks test_f
        q = os.path.join(d, "rxe")
        with open(q, "w") as f:
            f.write(LOG.replace("test_a) ... ok", "test_a) ... FAIL")
                       .replace("dots in it ... skipped 'Create UD QP without attrs is not supported'", "dots in it ... ok")
                       .replace("test_f (tests.test_y.B.test_f)\nDocstring of f ... ERROR\n", ""))
        out = subprocess.run([sys.executable, conformance.__file__, p, "H", q, "R"], capture_output=True, text=True)
        assert out.returncode == 0, out
        assert "- Soft-RoCE: R: 5 tests, 2 passed, 1 skipped, 2 failed, 0 errors." in out.stdout, out.stdout
        assert "not on Soft-RoCE: 1; pass on Soft-RoCE and not on Hematite: 1." in out.stdout, out.stdout
        assert "| `test_x.A.test_a` | pass |  | FAIL |  |" in out.stdout, out.stdout
        assert "| `test_y.B.test_f` | ERROR |  | - |  |" in out.stdout, out.stdout
        with open(p, "w") as f:
            f.write("nothing ran\n")
        out = subprocess.run([sys.executable, conformance.__file__, p, "t"], capture_output=True, text=True)
        assert out.returncode == 1, out
    print("conformance: all passed")


if __name__ == "__main__":
    main()
