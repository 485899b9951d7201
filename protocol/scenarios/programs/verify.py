"""feval scenario verifier (docs/PROTOCOL.md): runs the hidden tests in
/in/tests against the read-only final workspace /in/workspace with Debian's
pytest and writes a JUnit XML report to /out/junit.xml.

Plugin autoloading is off, pytest is imported before the workspace joins the
module path, and the workspace is appended (never prepended), so no
workspace file can stand in for pytest or the standard library.
"""
import os
import sys

# Only pytest itself: no plugin the validator's machine happens to have
# installed takes part in the result.
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"

import pytest  # noqa: E402

sys.path.append("/in/workspace")
os.environ["WORKSPACE"] = "/in/workspace"
os.chdir("/in/workspace" if os.path.isdir("/in/workspace") else "/tmp")
code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir=/in/tests", "-o", "junit_family=xunit2", "--junitxml=/out/junit.xml", "/in/tests"])
sys.exit(0 if code in (0, 1, 2, 5) else int(code))
