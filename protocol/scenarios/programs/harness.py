"""feval reference agent harness (scenarios protocol, docs/PROTOCOL.md).

Runs inside the scenario sandbox on Debian's python3, standard library only.
It sends the instruction to the OpenAI-compatible endpoint on the Unix socket
/run/feval.sock (the pack's policy sidecar), has the tool calls it gets back
(shell, read_file, write_file) run, and stops at finish, at an answer without
tool calls, at a model error, or when its turn or time budget is spent. It
writes /out/harness.json: the turns taken and why it stopped.

The harness never runs a tool itself: each tool call is one request on the
same socket (POST /feval/tool), which the validator serves by running the
call in a sandbox of its own (this same program, started with --tool), on a
copy of the workspace that the validator keeps, within bounds of its own. So no command can signal, stop, trace or hold the pipes of
the harness, and the harness's turn and time bounds hold whatever it does.

Everything the harness sends depends only on the workspace, the instruction,
the answers and the tools' output, so a replayed run sends the same requests.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SOCKET = "/run/feval.sock"
IN = "/in/scenario"
# In a tool call's sandbox (--tool): the workspace as the validator keeps it
# (read-only), the copy a call that may change it works on, and the call.
WS_IN = "/in/workspace"
WS = "/out/workspace"
TOOL_REQUEST = "/in/tool/request.json"
# How long the harness waits for a tool call's answer beyond the call's own
# bound: the validator's sandbox start and the workspace's copies.
TOOL_GRACE = 20.0
MAX_OUTPUT = 8192
MAX_FILE = 65536
MAX_ANSWER = 4 << 20

SYSTEM = ("You are a careful software engineer working in a small repository. "
          "Use the tools to inspect and change files, then call finish with a short summary.")

TOOLS = [
    {"type": "function", "function": {"name": "shell", "description": "Run a shell command in the workspace; returns its exit status and output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read a file of the workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "write_file", "description": "Write (create or replace) a file of the workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}}},
    {"type": "function", "function": {"name": "finish", "description": "Stop: the task is done.",
        "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}},
]


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def post(path, body, timeout):
    c = UnixConnection(SOCKET, timeout)
    try:
        c.request("POST", path, body=json.dumps(body, sort_keys=True, separators=(",", ":")).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read(MAX_ANSWER + 1)
        return r.status, data
    finally:
        c.close()


def inside(path):
    """The absolute path of a workspace-relative path, or None if it leaves the workspace."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    p = os.path.realpath(os.path.join(WS, path))
    if p != WS and not p.startswith(WS + "/"):
        return None
    return p


def clip(text, limit):
    if len(text) > limit:
        return text[:limit] + "\n[... %d more characters]" % (len(text) - limit)
    return text


def tool(name, args, deadline):
    """Has the validator run one tool call; returns its result text."""
    left = max(1.0, min(30.0, deadline - time.monotonic()))
    try:
        status, data = post("/feval/tool", {"name": name, "arguments": args, "seconds": left}, left + TOOL_GRACE)
        result = json.loads(data)["result"]
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
        return "error: the tool call got no answer"
    if status != 200 or not isinstance(result, str):
        return "error: the tool call got no answer"
    return result


def run_tool(name, args, seconds):
    """One tool call, in the tool call's sandbox; the command's bound is
    seconds of wall time."""
    if not isinstance(args, dict):
        return "error: arguments must be a JSON object"
    if name == "shell":
        cmd = args.get("command")
        if not isinstance(cmd, str):
            return "error: command must be a string"
        # Files, not pipes, in the call's bounded /tmp: what the command leaves
        # running cannot hold them.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.Popen(["/bin/sh", "-c", cmd], cwd=WS, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 start_new_session=True,
                                 env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"})
            try:
                p.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                return "error: the command timed out"
            finally:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
            out.seek(0)
            err.seek(0)
            text = (out.read() + err.read()).decode("utf-8", "replace")
        return "exit %d\n%s" % (p.returncode, clip(text, MAX_OUTPUT))
    if name == "read_file":
        p = inside(args.get("path"))
        if p is None:
            return "error: the path must name a file inside the workspace"
        try:
            with open(p, "rb") as f:
                return clip(f.read(MAX_FILE + 1).decode("utf-8", "replace"), MAX_FILE)
        except OSError as e:
            return "error: %s" % e.strerror
    if name == "write_file":
        p = inside(args.get("path"))
        content = args.get("content")
        if p is None or p == WS:
            return "error: the path must name a file inside the workspace"
        if not isinstance(content, str):
            return "error: content must be a string"
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as f:
                f.write(content)
        except OSError as e:
            return "error: %s" % e.strerror
        return "wrote %d bytes" % len(content.encode("utf-8"))
    return "error: unknown tool %r" % name


def tool_main():
    """The program of a tool call's sandbox: one call on a copy of the
    workspace in /out/workspace (read_file reads the validator's copy), its
    result as one JSON object on stdout."""
    global WS
    with open(TOOL_REQUEST, encoding="utf-8") as f:
        request = json.load(f)
    name, args = request.get("name"), request.get("arguments")
    if name == "read_file":
        WS = WS_IN
    elif name in ("shell", "write_file"):
        shutil.copytree(WS_IN, WS, symlinks=False)
    result = run_tool(name, args, float(request.get("seconds", 1.0)))
    sys.stdout.write(json.dumps({"result": result}))
    sys.stdout.flush()
    return 0


def main():
    cfg = json.loads(os.environ.get("FEVAL_HARNESS", "{}"))
    max_turns = int(cfg.get("max_turns", 16))
    deadline = time.monotonic() + int(cfg.get("wall_millis", 120000)) / 1000.0
    model = cfg.get("model", "policy")
    max_tokens = int(cfg.get("max_tokens", 4096))
    with open(os.path.join(IN, "instruction.md"), encoding="utf-8") as f:
        instruction = f.read()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": instruction}]
    turns, stop, detail = 0, "max_turns", ""
    while turns < max_turns:
        if time.monotonic() >= deadline:
            stop = "time"
            break
        turns += 1
        try:
            status, data = post("/v1/chat/completions", {"model": model, "messages": messages, "tools": TOOLS, "max_tokens": max_tokens},
                                    max(1.0, deadline - time.monotonic()))
        except (OSError, http.client.HTTPException) as e:
            stop, detail = "endpoint_error", type(e).__name__
            break
        if status != 200:
            stop, detail = "model_error", "HTTP %d" % status
            break
        try:
            msg = json.loads(data)["choices"][0]["message"]
            calls = msg.get("tool_calls") or []
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            stop, detail = "bad_answer", ""
            break
        kept = {"role": "assistant", "content": msg.get("content")}
        if calls:
            kept["tool_calls"] = calls
        messages.append(kept)
        if not calls:
            stop = "answer"
            break
        finished = False
        for call in calls:
            try:
                name = call["function"]["name"]
                args = json.loads(call["function"].get("arguments") or "{}")
                cid = call.get("id", "")
            except (ValueError, KeyError, TypeError):
                name, args, cid = "", None, ""
            if name == "finish":
                finished = True
                result = "ok"
            else:
                result = tool(name, args, deadline)
            messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        if finished:
            stop = "finish"
            break
    with open("/out/harness.json", "w") as f:
        json.dump({"turns": turns, "stop": stop, "detail": detail}, f, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(tool_main() if sys.argv[1:] == ["--tool"] else main())
