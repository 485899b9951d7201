#!/usr/bin/python3
"""The Qwen3 forward pass in plain torch (no transformers), the cross-check of
feval's reference runtime (package model). Reads one JSON request on stdin,
{"dir": MODEL_DIR, "rows": [[token ids], ...]}, runs each row teacher-forced
in float32 on one thread, and prints {"rows": [[[logits at position 0], ...],
...]}: the next-token logits after every token of every row. With "repeat": N
in the request it times N passes over the rows instead and prints {"seconds":
S, "tokens": T}. With "checks": [{"prompt", "completion", "seed": {"round",
"task_id", "miner"}, "sampling": {...}}, ...] it runs the provenance check of
docs/PROTOCOL.md ("Seeded sampling") on each and prints {"checks": [{"outcome",
"position", "claimed_token", "expected_token", "margin_micro", "near_ties",
"near_tie_margin_micro"}, ...]}. Run as "qwen3_torch.py --serve MODEL_DIR" it is
an external runtime (docs/PROTOCOL.md "External runtimes"): it generates with
the seeded sampler, one JSON request per line. The second verifier of records
(internal/conformance/python/fevalverify.py) imports it as a module for the
model-bound vectors: Qwen3(config, weights) and check().
"""
import hashlib
import json
import math
import struct
import sys
import time

import torch

torch.set_num_threads(1)
DT = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def load_safetensors(b):
    """The tensors of a safetensors file's bytes, widened to float32."""
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    data = bytearray(b[8 + n:])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        t = torch.frombuffer(data[lo:hi], dtype=DT[e["dtype"]]).reshape(e["shape"])
        out[name] = t.to(torch.float32)
    return out


class Qwen3:
    """A Qwen3 model from its config.json (parsed) and model.safetensors
    (bytes); from_dir reads both from a model directory."""

    def __init__(self, config, weights):
        self.c = config
        self.w = load_safetensors(weights)
        c = self.c
        self.hd = c["head_dim"]
        self.eps = c["rms_norm_eps"]
        self.inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
        self.lm = self.w["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else self.w["lm_head.weight"]

    @classmethod
    def from_dir(cls, d):
        with open(d + "/config.json", "rb") as f, open(d + "/model.safetensors", "rb") as w:
            return cls(json.load(f), w.read())

    def rms(self, x, w):
        v = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(v + self.eps))

    def rope(self, x, pos):
        freqs = torch.outer(pos.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), -1)
        cos, sin = emb.cos(), emb.sin()
        half = x.shape[-1] // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), -1)
        return x * cos[:, None, :] + rot * sin[:, None, :]

    def layer(self, i, x, pos):
        c, w, hd = self.c, self.w, self.hd
        p = "model.layers.%d." % i
        T = x.shape[0]
        h = self.rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(T, c["num_attention_heads"], hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(T, c["num_key_value_heads"], hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(T, c["num_key_value_heads"], hd)
        # q and k are normed per head over head_dim, after the projection and
        # before the rotation; v is not normed.
        q = self.rope(self.rms(q, w[p + "self_attn.q_norm.weight"]), pos)
        k = self.rope(self.rms(k, w[p + "self_attn.k_norm.weight"]), pos)
        g = c["num_attention_heads"] // c["num_key_value_heads"]
        K = k.repeat_interleave(g, 1).transpose(0, 1)
        V = v.repeat_interleave(g, 1).transpose(0, 1)
        Q = q.transpose(0, 1)
        s = (Q @ K.transpose(1, 2)) * (hd ** -0.5)
        mask = torch.full((T, T), float("-inf")).triu(1)
        a = torch.softmax(s + mask, -1, dtype=torch.float32) @ V
        a = a.transpose(0, 1).reshape(T, -1)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = self.rms(x, w[p + "post_attention_layernorm.weight"])
        m = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        return x + m @ w[p + "mlp.down_proj.weight"].T

    def forward(self, ids):
        pos = torch.arange(0, len(ids))
        x = self.w["model.embed_tokens.weight"][torch.tensor(ids)]
        for i in range(self.c["num_hidden_layers"]):
            x = self.layer(i, x, pos)
        return self.rms(x, self.w["model.norm.weight"]) @ self.lm.T


# The provenance check of docs/PROTOCOL.md "Seeded sampling", written from
# that text: the second implementation of model.Check, on torch's logits.

TAG = b"feval/rollouts/sample/v1"
MARGIN_CAP = 10**15


def position_key(seed, pos):
    h = hashlib.sha256()
    for s in (TAG, seed["round"].encode(), seed["task_id"].encode(), seed["miner"].encode()):
        h.update(s + b"\0")
    h.update(pos.to_bytes(4, "big"))
    return h.digest()


def noise(key, vocab):
    g = []
    for j in range((vocab + 3) // 4):
        blk = hashlib.sha256(key + j.to_bytes(4, "big")).digest()
        for k in range(4):
            if 4 * j + k == vocab:
                break
            x = int.from_bytes(blk[8 * k:8 * k + 8], "big")
            u = ((x >> 11) + 0.5) * 2.0 ** -53
            g.append(-math.log(-math.log(u)))
    return g


def choice(scores):
    best = 0
    for i, s in enumerate(scores):
        if s > scores[best]:
            best = i
    return best


def margin_micro(scores, c, claimed):
    if claimed < 0 or claimed >= len(scores):
        return MARGIN_CAP
    d = (scores[c] - scores[claimed]) * 1e6
    if not d < MARGIN_CAP:
        return MARGIN_CAP
    return math.floor(d)


def check(m, prompt, completion, seed, s):
    eos = m.c["eos_token_id"]
    eos = set(eos if isinstance(eos, list) else [eos])
    r = {"outcome": "ok", "position": 0, "claimed_token": 0, "expected_token": 0,
         "margin_micro": 0, "near_ties": 0, "near_tie_margin_micro": 0}
    n, limit = len(completion), s["max_new_tokens"]
    if n == 0 or n > limit:
        r.update(outcome="termination", position=min(n, limit))
        return r
    logits = m.forward(prompt + completion).tolist()
    for p, claimed in enumerate(completion):
        l = logits[len(prompt) - 1 + p]
        g = noise(position_key(seed, p), len(l))
        scores = [(x * 1000) / s["temperature_milli"] + gi for x, gi in zip(l, g)]
        c = choice(scores)
        if claimed != c:
            mg = margin_micro(scores, c, claimed)
            if mg > s["epsilon_micro"] or r["near_ties"] >= s["near_tie_budget"]:
                r.update(outcome="token", position=p, claimed_token=claimed, expected_token=c, margin_micro=mg)
                return r
            r["near_ties"] += 1
            r["near_tie_margin_micro"] = max(r["near_tie_margin_micro"], mg)
        if claimed in eos and p != n - 1:
            r.update(outcome="termination", position=p, claimed_token=claimed, expected_token=c)
            return r
    if completion[-1] not in eos and n < limit:
        r.update(outcome="termination", position=n)
    return r


def generate(m, prompt, seed, s):
    eos = m.c["eos_token_id"]
    eos = set(eos if isinstance(eos, list) else [eos])
    out = []
    while len(out) < s["max_new_tokens"]:
        l = m.forward(prompt + out)[-1].tolist()
        g = noise(position_key(seed, len(out)), len(l))
        c = choice([(x * 1000) / s["temperature_milli"] + gi for x, gi in zip(l, g)])
        out.append(c)
        if c in eos:
            break
    return out


def serve(d):
    """An external runtime of docs/PROTOCOL.md "External runtimes": one JSON
    request per line on stdin, one answer per line on stdout."""
    m = Qwen3.from_dir(d)
    with torch.no_grad():
        for line in sys.stdin:
            try:
                r = json.loads(line)
                seed = {"round": r["round"], "task_id": r["task_id"], "miner": r["miner"]}
                ans = {"completion": generate(m, r["prompt"], seed, r["sampling"])}
            except Exception as e:  # the answer says why; the next request still runs
                ans = {"error": "%s: %s" % (type(e).__name__, e)}
            sys.stdout.write(json.dumps(ans) + "\n")
            sys.stdout.flush()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
        return
    req = json.load(sys.stdin)
    m = Qwen3.from_dir(req["dir"])
    with torch.no_grad():
        if "checks" in req:
            out = [check(m, c["prompt"], c["completion"], c["seed"], c["sampling"]) for c in req["checks"]]
            json.dump({"checks": out}, sys.stdout)
            return
        if req.get("repeat"):
            # Timing: every row teacher-forced, "repeat" times, after one
            # warm-up pass; the logits are computed and dropped.
            for ids in req["rows"]:
                m.forward(ids)
            start = time.perf_counter()
            for _ in range(req["repeat"]):
                for ids in req["rows"]:
                    m.forward(ids)
            seconds = time.perf_counter() - start
            tokens = req["repeat"] * sum(len(ids) for ids in req["rows"])
            json.dump({"seconds": seconds, "tokens": tokens}, sys.stdout)
            return
        rows = [m.forward(ids).tolist() for ids in req["rows"]]
    json.dump({"rows": rows}, sys.stdout)


if __name__ == "__main__":
    main()
