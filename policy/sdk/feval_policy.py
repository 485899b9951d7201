"""feval's Python SDK for fusion policies (docs/POLICY.md sections 4 and 5).

A policy.py defines route(request, call). The runner (feval_policy_run.py)
serves the sidecar on descriptor 3 and calls route once per agent request;
call() reaches the meter only through the sidecar's socket at
$FEVAL_METER_SOCKET (/run/feval.sock).
"""

import http.client
import http.server
import json
import os
import socket
import socketserver
import types

__all__ = [
    "Answer", "CallError", "CapExceeded", "ModelRefused", "Request", "Stream",
    "call", "route_name", "serve",
]

METER_SOCKET = os.environ.get("FEVAL_METER_SOCKET", "/run/feval.sock")
AGENT_MODEL = "feval-policy"


class CallError(Exception):
    """A model call the meter refused or that failed."""

    def __init__(self, status, code, message):
        super().__init__("HTTP %d %s: %s" % (status, code, message))
        self.status, self.code, self.message = status, code, message


class CapExceeded(CallError):
    """The call does not fit in what remains of the scenario's spending cap."""


class ModelRefused(CallError):
    """The model is not on the task's allowlist."""


def _error(status, data):
    try:
        err = json.loads(data)["error"]
        code, message = str(err.get("code")), str(err.get("message"))
    except Exception:
        code, message = "unreadable_error", data[:200].decode("utf-8", "replace")
    cls = {"cap_exceeded": CapExceeded, "model_not_found": ModelRefused}.get(code, CallError)
    return cls(status, code, message)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=600):
        super().__init__("meter", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


_state = {"route": None}


def route_name(name):
    """Names the route taken for the current request (the request record)."""
    _state["route"] = str(name)[:64]


def _post(path, body):
    conn = _UnixConnection(METER_SOCKET)
    headers = {"Content-Type": "application/json"}
    if _state["route"]:
        headers["Feval-Route"] = _state["route"]
    conn.request("POST", path, json.dumps(body), headers)
    return conn, conn.getresponse()


class Answer(str):
    """A model's answer: the str is its content ("" if none)."""

    def __new__(cls, body):
        message = body["choices"][0]["message"]
        self = super().__new__(cls, message.get("content") or "")
        self.body = body
        self.message = message
        self.tool_calls = message.get("tool_calls") or []
        self.finish_reason = body["choices"][0].get("finish_reason")
        self.usage = body.get("usage") or {}
        self.model = body.get("model")
        return self


def _body(model, messages, params):
    body = {k: v for k, v in params.items() if v is not None}
    body["model"] = model
    body["messages"] = list(messages)
    return body


class Stream:
    """A streamed model call: iterate for its content pieces."""

    def __init__(self, model, messages, params):
        body = _body(model, messages, params)
        body["stream"] = True
        self._conn, self._resp = _post("/v1/chat/completions", body)
        if self._resp.status != 200:
            data = self._resp.read()
            self._conn.close()
            raise _error(self._resp.status, data)
        self._content = []
        self._calls = {}
        self._finish = None
        self._usage = {}
        self._model = model
        self._ended = False

    def __iter__(self):
        while not self._ended:
            line = self._resp.readline()
            if not line:
                self._ended = True
                self._conn.close()
                raise CallError(502, "stream_cut", "the stream ended without [DONE]")
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                self._ended = True
                self._conn.close()
                return
            chunk = json.loads(data)
            if "error" in chunk:
                self._ended = True
                self._conn.close()
                raise _error(502, data)
            if chunk.get("usage"):
                self._usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if choice.get("finish_reason"):
                    self._finish = choice["finish_reason"]
                for tc in delta.get("tool_calls") or []:
                    c = self._calls.setdefault(tc.get("index", 0), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                    c["id"] = tc.get("id") or c["id"]
                    fn = tc.get("function") or {}
                    c["function"]["name"] += fn.get("name") or ""
                    c["function"]["arguments"] += fn.get("arguments") or ""
                piece = delta.get("content")
                if piece:
                    self._content.append(piece)
                    yield piece

    def answer(self):
        """Waits for the end of the stream and returns the whole Answer."""
        for _ in self:
            pass
        message = {"role": "assistant", "content": "".join(self._content)}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        return Answer({"model": self._model, "usage": self._usage,
                       "choices": [{"message": message, "finish_reason": self._finish}]})


class _Call:
    """call(model, messages, **params) -> Answer; also .all and .stream."""

    def __call__(self, model, messages, **params):
        conn, resp = _post("/v1/chat/completions", _body(model, messages, params))
        data = resp.read()
        conn.close()
        if resp.status != 200:
            raise _error(resp.status, data)
        return Answer(json.loads(data))

    def all(self, calls):
        """Calls several models in parallel, admitted in list order; returns
        an Answer or a CallError per call, in the same order."""
        bodies = []
        for c in calls:
            model, messages = c[0], c[1]
            params = c[2] if len(c) > 2 else {}
            bodies.append(_body(model, messages, params))
        conn, resp = _post("/feval/v1/call_all", {"requests": bodies})
        data = resp.read()
        conn.close()
        if resp.status != 200:
            raise _error(resp.status, data)
        out = []
        for r in json.loads(data)["responses"]:
            if r["status"] == 200:
                out.append(Answer(r["body"]))
            else:
                out.append(_error(r["status"], json.dumps(r["body"]).encode()))
        return out

    def stream(self, model, messages, **params):
        return Stream(model, messages, params)


call = _Call()


class Request(dict):
    """The agent's request (a dict) with turn, session, has_tools, stream."""

    def __init__(self, body, turn, session):
        super().__init__(body)
        self.turn = turn
        self.session = session
        self.has_tools = bool(body.get("tools"))
        self.stream = bool(body.get("stream"))


class PolicyOutputError(Exception):
    """route returned something that is not an answer."""


def _message(result):
    """The assistant message of a route's return value."""
    if isinstance(result, Answer):
        m = {"role": "assistant", "content": result.message.get("content")}
        if result.tool_calls:
            m["tool_calls"] = result.tool_calls
        return m
    if isinstance(result, str):
        return {"role": "assistant", "content": str(result)}
    if isinstance(result, dict):
        return result
    raise PolicyOutputError("route returned %s; return a str, a message dict, an Answer or a Stream" % type(result).__name__)


def _dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def _finish(message):
    return "tool_calls" if isinstance(message, dict) and message.get("tool_calls") else "stop"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    route = None
    session = {}

    def log_message(self, *args):
        pass

    def _send(self, status, obj, headers=()):
        data = _dumps(obj)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, code, message):
        self._send(500, {"error": {"type": "policy_error", "code": code, "message": message[:1000], "param": None}})

    def do_GET(self):
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": AGENT_MODEL, "object": "model", "created": 0, "owned_by": "feval-policy"}]})
        else:
            self._send(404, {"error": {"type": "invalid_request_error", "code": "unknown_url", "message": self.path, "param": None}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        turn = int(self.headers.get("Feval-Turn", "0"))
        request = Request(body, turn, type(self).session)
        _state["route"] = None
        try:
            result = type(self).route(request, call)
            if isinstance(result, types.GeneratorType) or isinstance(result, Stream):
                pieces = iter(result)
            else:
                pieces = None
                message = _message(result)
        except PolicyOutputError as e:
            return self._fail("policy_malformed_output", str(e))
        except Exception as e:
            return self._fail("policy_raised", "%s: %s" % (type(e).__name__, e))
        headers = [("Feval-Route", _state["route"])] if _state["route"] else []
        if not request.stream:
            if pieces is not None:
                try:
                    message = _message(result.answer() if isinstance(result, Stream) else "".join(pieces))
                except Exception as e:
                    return self._fail("policy_raised", "%s: %s" % (type(e).__name__, e))
            return self._send(200, {"id": "policy", "object": "chat.completion", "created": 0, "model": AGENT_MODEL,
                                    "choices": [{"index": 0, "message": message, "finish_reason": _finish(message)}]}, headers)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()

        def event(obj):
            data = b"data: " + (obj if isinstance(obj, bytes) else _dumps(obj)) + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def chunk(delta, finish=None):
            event({"id": "policy", "object": "chat.completion.chunk", "created": 0, "model": AGENT_MODEL,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        chunk({"role": "assistant", "content": ""})
        calls = []
        try:
            if pieces is not None:
                for piece in pieces:
                    if not isinstance(piece, str):
                        raise PolicyOutputError("a streaming route yielded %s, not str" % type(piece).__name__)
                    chunk({"content": piece})
                if isinstance(result, Stream):
                    calls = result.answer().tool_calls
            else:
                if message.get("content") if isinstance(message, dict) else None:
                    chunk({"content": message["content"]})
                calls = message.get("tool_calls") or [] if isinstance(message, dict) else []
                if isinstance(message, dict) and "role" in message and message["role"] != "assistant":
                    chunk({"role": message["role"]})
        except Exception as e:
            event({"error": {"type": "policy_error", "code": "policy_raised", "message": "%s: %s" % (type(e).__name__, e)}})
            self.wfile.write(b"0\r\n\r\n")
            return
        if calls:
            chunk({"tool_calls": [dict(c, index=i) for i, c in enumerate(calls)]})
        chunk({}, "tool_calls" if calls else "stop")
        event(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    address_family = socket.AF_UNIX  # the sandbox has no other
    daemon_threads = True


def serve(route, fd=None):
    """Serves route(request, call) as an OpenAI chat server on the listening
    socket at descriptor fd ($FEVAL_LISTEN_FD, 3), forever."""
    if fd is None:
        fd = int(os.environ.get("FEVAL_LISTEN_FD", "3"))
    handler = type("Handler", (_Handler,), {"route": staticmethod(route), "session": {}})
    server = _Server("policy", handler, bind_and_activate=False)
    server.socket.close()
    server.socket = socket.socket(fileno=fd)
    server.serve_forever()
