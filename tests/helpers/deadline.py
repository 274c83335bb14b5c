"""The per-test deadline every suite's conftest installs.

No test may run longer than its suite's deadline: past it the whole run
stops with every thread's traceback, rather than hanging CI. Tests bound
their own waits far more tightly; this is the backstop.
"""

import faulthandler

import pytest


def per_test_deadline(seconds):
    """An autouse fixture stopping the run `seconds` into any one test;
    a conftest binds it to a name (``_test_deadline = per_test_deadline(S)``)."""

    @pytest.fixture(autouse=True)
    def _test_deadline():
        faulthandler.dump_traceback_later(seconds, exit=True)
        yield
        faulthandler.cancel_dump_traceback_later()

    return _test_deadline
