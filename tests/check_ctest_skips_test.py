#!/usr/bin/env python3
"""tests/check_ctest_skips.py, which fails CI on a test that did not run, against junit files of
each kind ctest writes: tests that ran, failed, skipped (gtest's [  SKIPPED ], a script's exit
77) and were never built. CI's "nothing skips quietly" rests on it: a checker that passed
everything would let every skip through.

usage: check_ctest_skips_test.py   (ctest: check_ctest_skips)
"""
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_ctest_skips.py")


def case(name, status, output="", skipped_message=None):
    """One <testcase> as ctest's --output-junit writes it."""
    skipped = (f'<skipped message="{skipped_message}"/>' if skipped_message is not None else "")
    return (f'<testcase name="{name}" classname="{name}" time="0.1" status="{status}">'
            f"{skipped}<system-out>{output}</system-out></testcase>")


class CheckCtestSkips(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.allowed = os.path.join(self.dir.name, "allowed.txt")
        with open(self.allowed, "w") as f:
            f.write("# the GPU tests\nGpu.Test  # needs a device\n")

    def tearDown(self):
        self.dir.cleanup()

    def check(self, cases, expected=None):
        junit = os.path.join(self.dir.name, "junit.xml")
        with open(junit, "w") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?><testsuite name="t" tests="%d">%s'
                    "</testsuite>" % (len(cases), "".join(cases)))
        args = [sys.executable, CHECKER, junit, self.allowed]
        if expected is not None:
            args.append(str(expected))
        return subprocess.run(args, capture_output=True, text=True)

    def test_tests_that_ran_and_allowed_skips_pass(self):
        r = self.check([case("A.Runs", "run"), case("Gpu.Test", "notrun", "", "Skipped")])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("1 tests ran, 1 allowed skips", r.stdout)

    def test_a_gtest_skip_not_listed_fails_naming_the_test_and_its_reason(self):
        out = "[ RUN      ] B.Skips\nb.cc:9: Skipped\nno slurm: sinfo not found\n"
        r = self.check([case("A.Runs", "run"), case("B.Skips", "notrun", out, "Skipped")])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("B.Skips (Skipped): no slurm: sinfo not found", r.stdout)

    def test_a_script_skip_not_listed_fails_with_its_skip_line(self):
        out = "SKIP: no Slurm client\n"
        r = self.check([case("slurm_x", "notrun", out, "SKIP_RETURN_CODE=77")])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("slurm_x (SKIP_RETURN_CODE=77): SKIP: no Slurm client", r.stdout)

    def test_a_test_never_built_fails(self):
        r = self.check([case("C_NOT_BUILT", "notrun")])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("C_NOT_BUILT (notrun)", r.stdout)

    def test_a_failure_is_not_a_skip_but_its_output_is_shown(self):
        r = self.check([case("D.Fails", "fail", "line one\nexpected 1, got 2\n")])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("D.Fails FAILED in the run that wrote", r.stdout)
        self.assertIn("  | expected 1, got 2", r.stdout)

    def test_fewer_tests_than_expected_fail(self):
        self.assertEqual(self.check([case("A.Runs", "run")], expected=1).returncode, 0)
        r = self.check([case("A.Runs", "run")], expected=2)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("2 tests expected", r.stdout)


if __name__ == "__main__":
    unittest.main()
