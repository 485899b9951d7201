"""feval scenario verifier (docs/PROTOCOL.md §6c): runs the hidden tests in
/in/tests against the final workspace with Debian's pytest and writes a JUnit
XML report to /out/junit.xml.

No workspace code runs in this sandbox. The workspace is not mounted here and
not on the module path; the hidden tests reach it only through the `ws`
fixture this program provides, which asks the validator, over the Unix socket
/run/feval.sock, to run workspace code in a sandbox of its own (the workspace
broker): /usr/bin/python3 with the read-only workspace as its working
directory and first on its module path, without the tests, this program's
output directory or any process of this sandbox in view. Its answer comes
back on the socket, bounded in size and time. A child that crashes, hangs or
answers nonsense fails the test that asked it, and nothing else.

Plugin autoloading is off, so no plugin the validator's machine happens to
have installed takes part in the result.
"""
import base64
import http.client
import io
import json
import os
import socket
import sys
import tarfile
import time

os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"

import pytest  # noqa: E402

WORKSPACE = "/in/workspace"  # in the broker's sandbox
PYTHON = "/usr/bin/python3"
SOCKET = "/run/feval.sock"
# How long to wait for the broker's answer beyond the call's own bound: its
# sandbox's start and end.
BROKER_GRACE = 20.0
CALL_SECONDS = 10  # one child's wall and CPU time
# Children may run until three quarters of the verifier's wall time
# (FEVAL_VERIFIER_WALL_MILLIS, from the task) have passed since this program
# started, so workspace code that hangs fails its tests and leaves pytest the
# time to write its report.
BUDGET_SECONDS = int(os.environ.get("FEVAL_VERIFIER_WALL_MILLIS", "60000")) * 3 / 4000
DEADLINE = time.monotonic() + BUDGET_SECONDS
MAX_ANSWER = 1 << 20  # bytes read from a child's stdout (and stderr)
# What a failure's text keeps of a child's answer: whatever workspace code
# answers, the report stays far below its bound.
MAX_SHOWN = 2000
# pytest's temporary directory (tmp_path): its files are copied to the
# child's sandbox, at the same paths, for each call, at most MAX_FILES bytes.
BASETEMP = "/tmp/feval-pytest"
MAX_FILES = 8 << 20

# The child: its own stdout (fd 1) becomes stderr, so whatever workspace code
# prints cannot mix with the answer, which goes to a duplicate of the
# original stdout as one JSON object: {"value": V} or {"raised": [class
# names of the exception's MRO], "message": M}.
CHILD = r'''
import importlib, json, os, sys
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
request = json.loads(sys.stdin.read())
sys.stdin = open(os.devnull)
sys.path.insert(0, os.getcwd())
def reply(obj):
    try:
        text = json.dumps(obj)
    except (TypeError, ValueError) as e:
        text = json.dumps({"unencodable": type(e).__name__})
    answer.write(text)
    answer.flush()
    os._exit(0)
try:
    if request["kind"] == "call":
        target = importlib.import_module(request["module"])
        for part in request["name"].split("."):
            target = getattr(target, part)
        value = target(*request["args"], **request["kwargs"])
    else:
        scope = {"__name__": "__feval_check__"}
        exec(request["source"], scope)
        value = scope.get("result")
except BaseException as e:
    try:
        message = str(e)[:2000]
    except BaseException:
        message = ""
    reply({"raised": [c.__name__ for c in type(e).__mro__], "message": message})
reply({"value": value})
'''


class WorkspaceFailure(AssertionError):
    """The workspace child crashed, hung, or answered what is not an answer."""


class WorkspaceRaised(Exception):
    """Workspace code raised: types are the class names of its MRO."""

    def __init__(self, types, message):
        super().__init__("workspace code raised %s: %s" % (types[0][:200] if types else "?", message[:MAX_SHOWN]))
        self.types = types
        self.message = message


def _files():
    """A tar of the regular files and directories under BASETEMP, names
    relative to it, or b"" when there is none."""
    if not os.path.isdir(BASETEMP):
        return b""
    buf, total = io.BytesIO(), 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for root, dirs, files in os.walk(BASETEMP):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                p = os.path.join(root, name)
                if os.path.islink(p) or not (os.path.isdir(p) or os.path.isfile(p)):
                    continue
                total += os.path.getsize(p) if os.path.isfile(p) else 0
                if total > MAX_FILES:
                    raise WorkspaceFailure("the test's temporary files exceed %d bytes" % MAX_FILES)
                t.add(p, arcname=os.path.relpath(p, BASETEMP), recursive=False)
    return buf.getvalue()


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def _child(args, stdin):
    """Has the broker run args in the workspace; returns (exit code, stdout,
    stderr) bytes, each cut at MAX_ANSWER + 1 bytes."""
    timeout = min(CALL_SECONDS, DEADLINE - time.monotonic())
    if timeout <= 0:
        raise WorkspaceFailure("the workspace children used up the verifier's %g s" % BUDGET_SECONDS)
    request = {"args": args, "stdin": base64.b64encode(stdin or b"").decode(), "seconds": timeout,
               "env": dict(os.environ), "files": base64.b64encode(_files()).decode()}
    c = _UnixConnection(SOCKET, timeout + BROKER_GRACE)
    try:
        c.request("POST", "/feval/ws", body=json.dumps(request).encode(), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read(4 * MAX_ANSWER + 4096)
        if r.status != 200:
            raise RuntimeError("the workspace broker answered HTTP %d" % r.status)
        answer = json.loads(data)
    finally:
        c.close()
    if answer.get("timed_out"):
        raise WorkspaceFailure("workspace child exceeded %g s: %r" % (timeout, args[:3]))
    if answer.get("stopped"):
        raise WorkspaceFailure("workspace child stopped: %s" % answer["stopped"])
    return (int(answer["exit_code"]), base64.b64decode(answer.get("stdout") or "")[:MAX_ANSWER + 1],
            base64.b64decode(answer.get("stderr") or "")[:MAX_ANSWER + 1])


def _shown(value):
    """The start of value's repr, for a failure's text."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


class Workspace:
    """What the hidden tests see of the final workspace (fixture `ws`)."""

    Raised = WorkspaceRaised

    def _ask(self, request):
        code, out, err = _child([PYTHON, "-I", "-B", "-c", CHILD], json.dumps(request).encode())
        tail = err[-2000:].decode("utf-8", "replace")
        if len(out) > MAX_ANSWER:
            raise WorkspaceFailure("workspace child answered more than %d bytes" % MAX_ANSWER)
        try:
            answer = json.loads(out.decode("utf-8"))
        except ValueError:
            raise WorkspaceFailure("workspace child exited %d without an answer; stderr: %s" % (code, tail)) from None
        if not isinstance(answer, dict):
            raise WorkspaceFailure("workspace child answered %s" % _shown(answer))
        if "value" in answer:
            return answer["value"]
        raised = answer.get("raised")
        if isinstance(raised, list) and all(isinstance(t, str) for t in raised):
            raise WorkspaceRaised(raised, str(answer.get("message", "")))
        raise WorkspaceFailure("workspace child answered %s" % _shown(answer))

    def call(self, module, name, *args, **kwargs):
        """module.name(*args, **kwargs) in a child; arguments and result are
        JSON (tuples arrive as lists). Raises WorkspaceRaised when it raised."""
        return self._ask({"kind": "call", "module": module, "name": name, "args": list(args), "kwargs": kwargs})

    def eval(self, source):
        """Executes source (the test's own code, which may import workspace
        modules) in a child and returns its variable `result` as JSON."""
        return self._ask({"kind": "eval", "source": source})

    def raises(self, exc, module, name, *args, **kwargs):
        """Whether module.name(*args, **kwargs) raised an exception with a
        class named exc in its MRO (pytest.raises by name)."""
        try:
            self.call(module, name, *args, **kwargs)
        except WorkspaceRaised as e:
            return exc in e.types
        return False

    def run(self, *args, stdin=None):
        """python3 -B *args in the workspace: (exit code, stdout, stderr) as
        text, each at most MAX_ANSWER bytes."""
        code, out, err = _child([PYTHON, "-B", *args], None if stdin is None else stdin.encode())
        if len(out) > MAX_ANSWER or len(err) > MAX_ANSWER:
            raise WorkspaceFailure("workspace program wrote more than %d bytes" % MAX_ANSWER)
        return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


class Fixtures:
    @pytest.fixture
    def ws(self):
        return Workspace()


if __name__ == "__main__":
    os.environ["WORKSPACE"] = WORKSPACE
    os.chdir("/tmp")
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir=/in/tests", "--basetemp=" + BASETEMP, "-o", "junit_family=xunit2",
                        "--junitxml=/out/junit.xml", "/in/tests"], plugins=[Fixtures()])
    sys.exit(0 if code in (0, 1, 2, 5) else int(code))
