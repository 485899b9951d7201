#!/usr/bin/python3
"""A second, independent verifier of feval verdicts, written from the
documents alone (docs/FORMAT.md, docs/PROTOCOL.md, docs/REWARDS.md,
docs/CONFORMANCE.md): Python's standard library, Debian's python3-cryptography
for ECDSA, the system's libzstd (through ctypes) to read tree layers, and
Debian's python3-torch for model-bound vectors.

It reads a conformance directory (testdata/conformance), checks every vector's
store, signatures, beacon derivation, reveal checks, audit sample, claimed
score and rewards, rebuilds the verdict byte for byte, and compares its outcome
with the vector's header. Rollouts submissions are read in the three formats of
PROTOCOL.md §6: a tree (1), a tree with a claims file (2), and a rows index
with a rows layer read by range (3). In scope: the rollouts protocol; math rows whose
reference and answer are plain numbers in one \\boxed{}; instruction rows of
five IFEval types; tasks that bind rows to a model (PROTOCOL.md §6
"Model-bound rollouts"): the committed model is read from the store, each
audited row's provenance checked by "Seeded sampling" with the torch forward
pass and check of model/testdata/qwen3_torch.py (Debian's python3-torch,
imported only then), its reward computed on the detokenized completion. A
vector that needs anything else (a BLS check of a drand signature, another
math form or instruction type, the gate's exact findings, the text of a model
refusal) is reported as out of scope with the reason, never guessed.

It also reads verdicts as consensus does (CONSENSUS.md §8.2, "Reading a
verdict", with the schemas of docs/schemas) over the reading vectors.

Usage: fevalverify.py CONFORMANCE_DIR
       fevalverify.py --reward-vectors SCORING_TESTDATA
       fevalverify.py --reading-vectors VECTORS_FILE SCHEMA_DIR
Prints one line per vector: "PASS name: outcome", "FAIL name: got X, header
expects Y" or "SKIP name: reason". Exits 1 if any vector fails.
"""

import base64
import codecs
import ctypes
import ctypes.util
import hashlib
import io
import json
import os
import re
import sys
import tarfile
from datetime import datetime, timezone
from fractions import Fraction

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

# FORMAT.md §3, §4
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"
INTOTO = "application/vnd.in-toto+json"
STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE = "https://feval.dev/attestation/signed-artifact/v1"
TREE = "application/vnd.feval.tree.v1.tar+zstd"
ROWS_INDEX = "application/vnd.feval.rollouts.index.v1"
ROWS = "application/vnd.feval.rollouts.rows.v1+jsonl"
CONTENT_DIGEST = "dev.feval.content.digest"
CONTENT_SIZE = "dev.feval.content.size"
TITLE = "org.opencontainers.image.title"
CREATED = "org.opencontainers.image.created"

# PROTOCOL.md §6, Beacon
QUICKNET = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971"
QUICKNET_GENESIS = 1692803367
QUICKNET_PERIOD = 3


def artifact_type(kind):
    return "application/vnd.feval.%s.v1+json" % kind


class Outcome(Exception):
    """A verification failure: its text is the outcome ("digest mismatch", ...)."""


class OutOfScope(Exception):
    """Something this verifier does not implement."""


# ---- canonical JSON (FORMAT.md §2) ----

def _utf16_key(s):
    return s.encode("utf-16-be")


def _canon_str(s):
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\b":
            out.append("\\b")
        elif c == "\f":
            out.append("\\f")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif o < 0x20:
            out.append("\\u%04x" % o)
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _canon(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _canon_str(v)
    if isinstance(v, list):
        return "[" + ",".join(_canon(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v, key=_utf16_key)
        return "{" + ",".join(_canon_str(k) + ":" + _canon(v[k]) for k in keys) + "}"
    raise ValueError("not a canonical JSON value: %r" % (v,))


def canonical(v):
    return _canon(v).encode("utf-8")


def _no_float(s):
    raise ValueError("non-integer number %s" % s)


def _no_dupes(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate member %r" % k)
        d[k] = v
    return d


def parse_record(b):
    """A record: canonical JSON, integers only (FORMAT.md §2)."""
    v = json.loads(b.decode("utf-8"), parse_float=_no_float, object_pairs_hook=_no_dupes)
    if canonical(v) != b:
        raise Outcome("malformed record")
    return v


# ---- zstd through the system library ----

class _Buf(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


_zstd = None


def zstd_decompress(data, limit=1 << 30):
    global _zstd
    if _zstd is None:
        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        _zstd = ctypes.CDLL(name)
        _zstd.ZSTD_createDStream.restype = ctypes.c_void_p
        _zstd.ZSTD_freeDStream.argtypes = [ctypes.c_void_p]
        _zstd.ZSTD_initDStream.argtypes = [ctypes.c_void_p]
        _zstd.ZSTD_decompressStream.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Buf), ctypes.POINTER(_Buf)]
        _zstd.ZSTD_decompressStream.restype = ctypes.c_size_t
        _zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]
        _zstd.ZSTD_isError.restype = ctypes.c_uint
    ds = _zstd.ZSTD_createDStream()
    try:
        _zstd.ZSTD_initDStream(ds)
        src = ctypes.create_string_buffer(data, len(data))
        inb = _Buf(ctypes.cast(src, ctypes.c_void_p), len(data), 0)
        out = bytearray()
        chunk = ctypes.create_string_buffer(1 << 17)
        while True:
            outb = _Buf(ctypes.cast(chunk, ctypes.c_void_p), len(chunk), 0)
            r = _zstd.ZSTD_decompressStream(ds, ctypes.byref(outb), ctypes.byref(inb))
            if _zstd.ZSTD_isError(r):
                raise Outcome("digest mismatch")  # a damaged stream: its content digest cannot hold
            out += chunk.raw[: outb.pos]
            if len(out) > limit:
                raise Outcome("digest mismatch")
            if r == 0 and inb.pos == inb.size:
                return bytes(out)
            if inb.pos == inb.size and outb.pos == 0:
                raise Outcome("digest mismatch")  # truncated
    finally:
        _zstd.ZSTD_freeDStream(ds)


# ---- the store (FORMAT.md §1) ----

class Store:
    def __init__(self, root):
        self.root = root
        with open(os.path.join(root, "oci-layout"), "rb") as f:
            if json.load(f).get("imageLayoutVersion") != "1.0.0":
                raise Outcome("not a store")
        with open(os.path.join(root, "index.json"), "rb") as f:
            self.index = json.load(f)["manifests"]
        self._subjects = None

    def blob(self, digest, size=None):
        """The bytes of a blob, checked against its digest and size."""
        algo, _, hexd = digest.partition(":")
        if algo != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", hexd):
            raise Outcome("malformed record")
        path = os.path.join(self.root, "blobs", "sha256", hexd)
        try:
            with open(path, "rb") as f:
                b = f.read()
        except FileNotFoundError:
            raise Outcome("missing blob")
        if hashlib.sha256(b).hexdigest() != hexd or (size is not None and len(b) != size):
            raise Outcome("digest mismatch")
        return b

    def manifest(self, desc_or_digest):
        if isinstance(desc_or_digest, dict):
            b = self.blob(desc_or_digest["digest"], desc_or_digest["size"])
        else:
            b = self.blob(desc_or_digest)
        return json.loads(b)

    def referrers(self, target, atype):
        """Manifests listed in index.json whose subject is target, of artifact
        type atype (the manifest's artifactType, else its config's media type).
        Listed manifests that cannot be read are not referrers; a damaged one
        whose unverified bytes name target fails the listing (FORMAT.md §7.1)."""
        if self._subjects is None:
            self._subjects, self._damaged = {}, set()
            for d in self.index:
                try:
                    m = self.manifest(d)
                except Outcome as e:
                    if str(e) != "missing blob":
                        try:
                            with open(os.path.join(self.root, "blobs", "sha256", d["digest"].split(":", 1)[1]), "rb") as f:
                                self._damaged.add(json.loads(f.read(4 << 20))["subject"]["digest"])
                        except (OSError, ValueError, KeyError, TypeError):
                            pass
                    continue
                subj = m.get("subject")
                if not subj:
                    continue
                t = m.get("artifactType") or m.get("config", {}).get("mediaType", "")
                self._subjects.setdefault(subj["digest"], []).append((d["digest"], t))
        if target in self._damaged:
            raise Outcome("digest mismatch")
        return sorted(d for d, t in self._subjects.get(target, []) if t == atype)

    def listed(self, digest):
        """The index.json entry of a manifest named by its digest alone."""
        for d in self.index:
            if d["digest"] == digest:
                return d
        raise Outcome("missing blob")

    def artifact(self, digest, kind, desc=None):
        """A feval artifact: (manifest, record) with every blob checked. A
        manifest named by digest alone must be listed (FORMAT.md §7.1)."""
        m = self.manifest(desc if desc is not None else self.listed(digest))
        if m.get("artifactType") != artifact_type(kind) or not m.get("layers") or m["layers"][0]["mediaType"] != artifact_type(kind):
            raise Outcome("malformed record")
        rec = parse_record(self.blob(m["layers"][0]["digest"], m["layers"][0]["size"]))
        for layer in m["layers"][1:]:
            if layer["mediaType"] == ROWS:  # read by range: present with its size (PROTOCOL.md §7)
                self.unverified(layer["digest"], layer["size"])
            else:
                self.payload(layer)
        return m, rec

    def unverified(self, digest, size):
        """A blob's bytes, NOT checked against its digest (only its size): a
        format-3 rows layer whose rows are each checked against the index."""
        path = os.path.join(self.root, "blobs", "sha256", digest.partition(":")[2])
        try:
            with open(path, "rb") as f:
                b = f.read()
        except FileNotFoundError:
            raise Outcome("missing blob")
        if len(b) != size:
            raise Outcome("digest mismatch")
        return b

    def payload(self, layer):
        """A payload layer's uncompressed content, checked against its
        dev.feval.content.digest and dev.feval.content.size."""
        b = self.blob(layer["digest"], layer["size"])
        if layer["mediaType"] == TREE:
            b = zstd_decompress(b)
        ann = layer.get("annotations", {})
        if "sha256:" + hashlib.sha256(b).hexdigest() != ann.get(CONTENT_DIGEST) or str(len(b)) != ann.get(CONTENT_SIZE):
            raise Outcome("digest mismatch")
        return b

    def tree(self, m):
        """The files of an artifact's tree layer."""
        for layer in m["layers"][1:]:
            if layer["mediaType"] == TREE:
                files = {}
                with tarfile.open(fileobj=io.BytesIO(self.payload(layer)), mode="r:") as tf:
                    for ti in tf:
                        if ti.isfile():
                            files[ti.name] = tf.extractfile(ti).read()
                return files
        raise Outcome("malformed record")


# ---- signatures (FORMAT.md §4) ----

def fingerprint(pem):
    key = serialization.load_pem_public_key(pem)
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest(), key


def pae(payload_type, payload):
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def read_signature(store, ref, target):
    """A feval signature referrer of target: (pae bytes, [der signatures],
    carried key) or None when it is not one."""
    try:
        m = store.manifest(ref)
        if len(m.get("layers", [])) != 1 or (m.get("subject") or {}).get("digest") != target or m["layers"][0]["mediaType"] != BUNDLE:
            return None
        b = json.loads(store.blob(m["layers"][0]["digest"], m["layers"][0]["size"]))
        if b.get("mediaType") != BUNDLE:
            return None
        env = b["dsseEnvelope"]
        if env.get("payloadType") != INTOTO:
            return None
        payload = base64.b64decode(env["payload"], validate=True)
        st = json.loads(payload)
        if st.get("_type") != STATEMENT or st.get("predicateType") != PREDICATE:
            return None
        subj = st.get("subject")
        if not isinstance(subj, list) or len(subj) != 1 or subj[0].get("digest", {}).get("sha256") != target.split(":", 1)[1]:
            return None
        sigs = [base64.b64decode(s["sig"], validate=True) for s in env.get("signatures", [])]
        carried = None
        pem = st.get("predicate", {}).get("publicKey", "")
        if pem:
            try:
                carried = fingerprint(pem.encode())
            except ValueError:
                carried = None
        return pae(env["payloadType"], payload), sigs, carried
    except (Outcome, ValueError, KeyError, TypeError, AttributeError):
        return None


def verifies(parsed, key):
    data, sigs, _ = parsed
    for s in sigs:
        try:
            key.verify(s, data, ec.ECDSA(hashes.SHA256()))
            return True
        except (InvalidSignature, ValueError):
            pass
    return False


def signed_by(store, target, keys):
    """The fingerprints among keys ({fingerprint: key}) that made a valid feval
    signature of target; with keys None, the keys the signatures carry."""
    out = set()
    for ref in store.referrers(target, BUNDLE):
        parsed = read_signature(store, ref, target)
        if parsed is None:
            continue
        cands = keys if keys is not None else ({parsed[2][0]: parsed[2][1]} if parsed[2] else {})
        for fp, k in cands.items():
            if verifies(parsed, k):
                out.add(fp)
    return out


# ---- rewards (REWARDS.md) ----

PLAIN = re.compile(r"-?(?:\d+(?:\.\d+)?|\\[dt]?frac\{\d+\}\{\d+\}|\d+/\d+)")


def plain_number(s):
    """The value of a plain number (REWARDS.md: integers, decimals, a/b,
    \\frac{a}{b}, with a leading minus), or None."""
    s = s.strip()
    if len(s) > 40 or not PLAIN.fullmatch(s):
        return None
    neg = s.startswith("-")
    body = s[1:] if neg else s
    m = re.fullmatch(r"\\[dt]?frac\{(\d+)\}\{(\d+)\}", body) or re.fullmatch(r"(\d+)/(\d+)", body)
    if m:
        if int(m.group(2)) == 0:
            return None
        v = Fraction(int(m.group(1)), int(m.group(2)))
    else:
        v = Fraction(body)
    return -v if neg else v


# ---- answer extraction (REWARDS.md §2.2) ----

_CONNECTOR_MARKUP = [("\\text{", " "), ("\\mathrm{", " "), ("}", " "), ("\\qquad", " "), ("\\quad", " "),
                     ("\\(", " "), ("\\)", " "), ("\\[", " "), ("\\]", " "), ("\\,", " "), ("\\;", " "),
                     ("\\ ", " "), ("$", " "), (",", " , "), (";", " ; ")]


def is_connector(t):
    if len(t.encode()) > 64:
        return False
    # one pass, leftmost-first, as a replacer does
    out, i = [], 0
    while i < len(t):
        for old, new in _CONNECTOR_MARKUP:
            old = old.replace("\\\\", "\\")
            if t.startswith(old, i):
                out.append(new)
                i += len(old)
                break
        else:
            out.append(t[i])
            i += 1
    return all(w.lower() in (",", ";", "and", "or") for w in "".join(out).split())


def _brace_closes(s, first):
    """close[i]: index of the brace closing the one opened at i (i >= first)."""
    close, stack, i = {}, [], first
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            close[stack.pop()] = i
        i += 1
    return close


def _boxed(s):
    starts = sorted(m.end() for m in re.finditer(r"\\(?:boxed|fbox)(?![A-Za-z])", s))
    if not starts:
        return None
    close = _brace_closes(s, starts[0])

    def cmd_start(at):
        return at - (len("\\boxed") if s[:at].endswith("\\boxed") else len("\\fbox"))

    for k in range(len(starts) - 1, -1, -1):
        at = starts[k]
        j = at
        while j < len(s) and s[j] in " \t":
            j += 1
        if j < len(s) and s[j] == "{":
            c = close.get(j)
            if c is not None and s[j + 1:c].strip():
                parts, frm = [s[j + 1:c].strip()], cmd_start(at)
                for e in range(k - 1, -1, -1):
                    ea = starts[e]
                    ej = ea
                    while ej < len(s) and s[ej] in " \t":
                        ej += 1
                    if ej >= len(s) or s[ej] != "{":
                        break
                    ec = close.get(ej)
                    if ec is None or ec >= frm or not is_connector(s[ec + 1:frm]) or not s[ej + 1:ec].strip():
                        break
                    parts.append(s[ej + 1:ec].strip())
                    frm = cmd_start(ea)
                return ", ".join(reversed(parts))
            continue
        if j > at:
            e = j
            while e < len(s) and s[e] not in " \n$\t":
                e += 1
            if s[j:e].strip():
                return s[j:e].strip()
    return None


def _trim(s):
    s = s.strip().strip("*").strip()
    if s.endswith("."):
        s = s[:-1]
    return s.strip()


_DELIMS = [("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")]


def _after_phrase(s, phrases):
    low = "".join(c.lower() if "A" <= c <= "Z" else c for c in s)
    best, blen = -1, 0
    for p in phrases:
        i = low.rfind(p)
        if i > best:
            best, blen = i, len(p)
    if best < 0:
        return None
    rest = s[best + blen:].lstrip(" \t:")
    if rest.startswith("\n"):
        rest = rest.lstrip(" \t\r\n")
    for o, c in _DELIMS:
        if rest.startswith(o):
            body = rest[len(o):]
            i = body.find(c)
            if i > 0 and body[:i].strip():
                return body[:i].strip()
            break
    rest = rest.split("\n", 1)[0].split(". ", 1)[0]
    return _trim(rest) or None


def _last_line(s):
    s = s.rstrip(" \t\r\n")
    i = s.rfind("\n")
    if i < 0:
        return s.strip()
    t = s.strip().rstrip(".")
    for o, c in (("$$", "$$"), ("\\[", "\\]")):
        if t.endswith(c):
            op = t[: len(t) - len(c)].rfind(o)
            if 0 <= op < i:
                return t[t[:op].rfind("\n") + 1:].strip()
    return s[i + 1:].strip()


def _last_math(line):
    spans, i = [], 0
    while i < len(line):
        if line.startswith("\\$", i):
            i += 2
            continue
        for o, c in _DELIMS:
            if line.startswith(o, i):
                body = line[i + len(o):]
                off, j = 0, -1
                while True:
                    j = body.find(c, off)
                    if j < 0 or c[0] != "$" or j == 0 or body[j - 1] != "\\":
                        break
                    off = j + 1
                if j < 0:
                    i = len(line) + 1
                    break
                if body[:j].strip():
                    spans.append((i, i + len(o) + j + len(c), body[:j].strip()))
                i += len(o) + j + len(c)
                break
        else:
            i += 1
    if not spans:
        return None
    k = len(spans) - 1
    while k > 0 and is_connector(line[spans[k - 1][1]:spans[k][0]]):
        k -= 1
    return ", ".join(b for _, _, b in spans[k:])


def extract(response):
    """(answer, method) by the rules of REWARDS.md §2.2, or ("", "none")."""
    a = _boxed(response)
    if a:
        return a, "boxed"
    a = _after_phrase(response, ("final answer is", "final answer:"))
    if a:
        return a, "final_answer"
    a = _after_phrase(response, ("answer is", "answer:"))
    if a:
        return a, "answer_is"
    line = _last_line(response)
    a = _last_math(line)
    if a:
        return a, "last_math"
    if "\n" not in response.strip() and len(line.encode()) <= 64 and _trim(line):
        return _trim(line), "whole"
    return "", "none"


def math_reward(reference, response):
    """REWARDS.md §1 and §2.5: no answer is 0; plain numbers compare exactly."""
    ans, how = extract(response)
    if how == "none":
        return Fraction(0)
    got, want = plain_number(ans), plain_number(reference)
    if got is None or want is None:
        raise OutOfScope("math answer %r or reference %r is not a plain number" % (ans, reference))
    return Fraction(1) if got == want else Fraction(0)


class CheckerError(Exception):
    """A task row the rules refuse (REWARDS.md §1): the verdict is infra_error."""


# REWARDS.md §3.3: the supported instruction ids; any other id is a task error.
SUPPORTED = {
    "keywords:existence", "keywords:frequency", "keywords:forbidden_words", "keywords:letter_frequency",
    "length_constraints:number_sentences", "length_constraints:number_paragraphs",
    "length_constraints:number_words", "length_constraints:nth_paragraph_first_word",
    "detectable_content:number_placeholders", "detectable_content:postscript",
    "detectable_format:number_bullet_lists", "detectable_format:constrained_response",
    "detectable_format:number_highlighted_sections", "detectable_format:multiple_sections",
    "detectable_format:json_format", "detectable_format:title", "combination:two_responses",
    "combination:repeat_prompt", "startend:end_checker", "startend:quotation",
    "change_case:capital_word_frequency", "change_case:english_capital", "change_case:english_lowercase",
    "punctuation:no_comma",
}


def relation(rel, actual, threshold):
    if rel == "less than":
        return actual < threshold
    if rel == "at least":
        return actual >= threshold
    raise OutOfScope("relation %r" % rel)


def follows(iid, kw, r):
    if iid not in SUPPORTED:
        raise CheckerError(iid)
    if r.strip() == "":
        return False
    if iid == "punctuation:no_comma":
        return "," not in r
    if iid == "change_case:english_lowercase":
        return r.islower()
    if iid == "length_constraints:number_words":
        return relation(kw["relation"], len(re.findall(r"\w+", r)), kw["num_words"])
    if iid == "detectable_format:number_bullet_lists":
        n = len(re.findall(r"^\s*\*[^\*].*$", r, flags=re.MULTILINE)) + len(re.findall(r"^\s*-.*$", r, flags=re.MULTILINE))
        return n == kw["num_bullets"]
    if iid == "startend:end_checker":
        return lower(r.strip().strip('"')).endswith(lower(kw["end_phrase"].strip()))
    return follows_more(iid, kw, r)


def _simple(c, f):
    m = f(c)
    return m if len(m) == 1 else c


def fold(s):
    """REWARDS.md §3.2: lower(upper(c)) per character, simple mappings."""
    return "".join(_simple(_simple(c, str.upper), str.lower) for c in s)


def lower(s):
    return "".join(_simple(c, str.lower) for c in s)


def _no_constant(name):
    raise ValueError(name)


def follows_more(iid, kw, r):
    """The other instruction types of REWARDS.md §3.3, from the table's text
    (not used by the conformance vectors; checked against ifeval_vectors)."""
    if iid == "keywords:existence":
        return all(fold(k) in fold(r) for k in kw["keywords"])
    if iid == "keywords:frequency":
        return relation(kw["relation"], fold(r).count(fold(kw["keyword"].strip())), kw["frequency"])
    if iid == "keywords:forbidden_words":
        fr = fold(r)
        return not any(re.search(r"\b" + re.escape(fold(w)) + r"\b", fr) for w in kw["forbidden_words"])
    if iid == "keywords:letter_frequency":
        letter = lower(kw["letter"].strip())
        return relation(kw["let_relation"], sum(1 for c in r if lower(c) == letter), kw["let_frequency"])
    if iid == "length_constraints:number_paragraphs":
        p = re.split(r"\s?\*\*\*\s?", r)
        n = len(p)
        for i, piece in enumerate(p):
            if not piece.strip():
                if i in (0, len(p) - 1):
                    n -= 1
                else:
                    return False
        return n == kw["num_paragraphs"]
    if iid == "length_constraints:nth_paragraph_first_word":
        p = r.split("\n\n")
        n = sum(1 for piece in p if piece.strip())
        nth = kw["nth_paragraph"]
        if nth > n or not p[nth - 1].strip():
            return False
        word = p[nth - 1].strip().split()[0].lstrip("'").lstrip('"')
        first = ""
        for c in word:
            if c in ".,?!'\"":
                break
            first += lower(c)
        return n == kw["num_paragraphs"] and first == lower(kw["first_word"])
    if iid == "detectable_content:number_placeholders":
        return len(re.findall(r"\[.*?\]", r)) >= kw["num_placeholders"]
    if iid == "detectable_content:postscript":
        m, lr = kw["postscript_marker"].strip(), lower(r)
        if m == "P.S.":
            return re.search(r"p\.\s?s\.", lr) is not None
        if m == "P.P.S":
            return re.search(r"p\.\s?p\.\s?s", lr) is not None
        return lower(m) in lr
    if iid == "detectable_format:constrained_response":
        v = r.strip()
        return any(o in v for o in ("My answer is yes.", "My answer is no.", "My answer is maybe."))
    if iid == "detectable_format:number_highlighted_sections":
        n = sum(1 for h in re.findall(r"\*[^\n\*]*\*", r) if h.strip("*").strip())
        n += sum(1 for h in re.findall(r"\*\*[^\n\*]*\*\*", r) if h.strip("*").strip())
        return n >= kw["num_highlights"]
    if iid == "detectable_format:multiple_sections":
        return len(re.findall(re.escape(kw["section_spliter"].strip()) + r"\s?\d+", r)) >= kw["num_sections"]
    if iid == "detectable_format:json_format":
        v = r.strip()
        for pre in ("```json", "```Json", "```JSON", "```"):
            v = v.removeprefix(pre)
        v = v.removesuffix("```").strip()
        try:
            # numbers of any length (REWARDS.md §3.4): kept as text, so
            # Python's 4,300-digit limit on int() does not apply
            json.loads(v, parse_constant=_no_constant, parse_int=str)
        except ValueError:
            return False
        except RecursionError:  # §3.3 allows 10,000 levels; Python cannot read them
            raise OutOfScope("JSON nested deeper than Python's recursion limit")
        return True
    if iid == "detectable_format:title":
        for line in r.split("\n"):
            i, j = line.find("<<"), line.rfind(">>")
            if i >= 0 and j >= i + 3 and line[i:j + 2].lstrip("<").rstrip(">").strip():
                return True
        return False
    if iid == "combination:two_responses":
        p = r.split("******")
        valid = []
        for i, piece in enumerate(p):
            if not piece.strip():
                if i not in (0, len(p) - 1):
                    return False
            else:
                valid.append(piece)
        return len(valid) == 2 and valid[0].strip() != valid[1].strip()
    if iid == "combination:repeat_prompt":
        return lower(r.strip()).startswith(lower(kw["prompt_to_repeat"].strip()))
    if iid == "startend:quotation":
        v = r.strip()
        return len(v.encode()) > 1 and v.startswith('"') and v.endswith('"')
    if iid == "change_case:english_capital":
        return r.isupper()
    raise OutOfScope("instruction %s" % iid)


def row_reward(item, response):
    if item["kind"] == "math":
        return math_reward(item["answer"], response)
    if item["kind"] == "if":
        ids = item["instruction_id_list"]
        n = sum(1 for iid, kw in zip(ids, item["kwargs"]) if follows(iid, kw, response))
        return Fraction(n, len(ids))
    raise OutOfScope("task kind %s" % item["kind"])


def fmt(q):
    return str(q.numerator) if q.denominator == 1 else "%d/%d" % (q.numerator, q.denominator)


REWARD = re.compile(r"0|1|[1-9][0-9]*/[1-9][0-9]*")


def parse_reward(s):
    if not REWARD.fullmatch(s):
        return None
    q = Fraction(s)
    if q < 0 or q > 1 or fmt(q) != s:
        return None
    return q


# ---- rows index (PROTOCOL.md §6, submission format 3; FORMAT.md) ----

def parse_rows_index(b, max_rows, max_row_bytes):
    """The rows index as (meta, rows_size, entries), entries in rows-file order
    as (task_id, reward, offset, length, sha256); None when it is malformed."""
    import struct
    if len(b) < 32 or b[:8] != b"FVRIDX01":
        return None
    n, r, meta_size, ids_size, rows_size = struct.unpack(">IIIIQ", b[8:32])
    if not (1 <= n <= max_rows and 1 <= r <= n and 1 <= meta_size <= 4096 and n <= ids_size <= n * 1024):
        return None
    pos = 32 + meta_size
    meta = b[32:pos]
    rewards = []
    for _ in range(r):
        if pos >= len(b):
            return None
        ln = b[pos]
        text = b[pos + 1:pos + 1 + ln].decode("ascii", "replace")
        if not 1 <= ln <= 129 or len(text) != ln or parse_reward(text) is None or (rewards and rewards[-1] >= text):
            return None
        rewards.append(text)
        pos += 1 + ln
    if len(b) - pos != n * 60 + ids_size:
        return None
    ids = b[pos + n * 60:]
    entries, off, id_off = [], 0, 0
    for i in range(n):
        o, ln, rw, io_, il = struct.unpack(">QIIII", b[pos + 56 * i:pos + 56 * i + 24])
        h = b[pos + 56 * i + 24:pos + 56 * i + 56]
        if o != off or not 2 <= ln <= max_row_bytes + 1 or rw >= r or io_ != id_off or not 1 <= il <= 1024:
            return None
        raw = ids[io_:io_ + il]
        if len(raw) != il or any(c < 0x20 or c == 0x7f for c in raw):
            return None
        try:
            tid = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        entries.append((tid, rewards[rw], o, ln, h))
        off, id_off = off + ln, id_off + il
    if off != rows_size or id_off != ids_size:
        return None
    order = struct.unpack(">%dI" % n, b[pos + 56 * n:pos + 60 * n])
    if sorted(order) != list(range(n)):
        return None
    keys = [entries[i][0].encode() for i in order]
    if any(keys[k - 1] >= keys[k] for k in range(1, n)):
        return None
    return meta, rows_size, entries


# ---- audit sample (PROTOCOL.md §6) ----

def audit_seed(source, value, commitment, submission):
    parts = [b"feval/audit-seed/v1", source.encode(), value.encode(), commitment.encode(), submission.encode()]
    return hashlib.sha256(b"\x00".join(parts)).digest()


def sample(seed, ids, n):
    ranked = sorted(ids, key=lambda i: (hashlib.sha256(seed + i.encode()).digest(), i.encode()))
    return ranked[:n]


def commitment_value(submission, miner, round_, salt):
    return "sha256:" + hashlib.sha256(b"\x00".join([b"feval/commitment/v1", submission.encode(), miner.encode(),
                                                     round_.encode(), salt])).hexdigest()


def within(seen, window):
    """PROTOCOL.md §5, Windows, precisely."""
    if window["kind"] == "height":
        return "height" in seen and seen["height"] <= window.get("height", 0)
    return unix(seen["time"]) <= unix(window["time"])


def unix(t):
    return int(datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())


def derive_beacon(b, round_rec, reveal_seen):
    """The recorded beacon as replay derives it again, or Outcome("beacon failure")."""
    d = b.get("drand")
    if d is None:
        return {"source": b["source"], "value": b["value"], "verified": False}
    if d["chain"] != QUICKNET or not re.fullmatch(r"[0-9a-f]{96}", d["signature"]):
        raise Outcome("beacon failure")
    w = round_rec["commit_until"]
    after = unix(w["time"] if w["kind"] == "time" else reveal_seen["time"])
    want = 1 if after < QUICKNET_GENESIS else (after - QUICKNET_GENESIS) // QUICKNET_PERIOD + 2
    if d["round"] != want:
        raise Outcome("beacon failure")
    # The BLS12-381 check of the signature needs a pairing library.
    return {"drand": d, "source": "drand:%s:%d" % (d["chain"], d["round"]),
            "value": hashlib.sha256(bytes.fromhex(d["signature"])).hexdigest(), "verified": True,
            "_needs_bls": True}


# ---- model-bound rollouts (PROTOCOL.md §6 "Model-bound rollouts" and
# "Seeded sampling"; FORMAT.md "Model artifacts", "Rollouts models") ----

MODEL_MANIFEST = "application/vnd.cncf.model.manifest.v1+json"
MODEL_CONFIG = "application/vnd.cncf.model.config.v1+json"
MODEL_LAYERS = ("application/vnd.cncf.model.weight.v1.raw", "application/vnd.cncf.model.weight.config.v1.raw")
MODEL_PATH = "org.cncf.model.filepath"
MODEL_LAYOUT = "dev.feval.model.layout"
OTHER_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib",
                 ".gguf", ".onnx", ".h5", ".msgpack", ".npz", ".npy", ".tflite", ".mlmodel")

_torch = None


def torch_model():
    """The Qwen3 forward pass in torch and the provenance check of
    model/testdata/qwen3_torch.py, also written from PROTOCOL.md, imported
    (with torch) only when a vector binds rows to a model."""
    global _torch
    if _torch is None:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "..", "..", "model", "testdata"))
        import qwen3_torch
        _torch = qwen3_torch
    return _torch


def byte_decoder():
    """GPT-2's byte-level alphabet read back: character to byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def per_byte_replace(e):
    """UTF-8 decoding as PROTOCOL.md says: each invalid byte is one U+FFFD."""
    return "\ufffd" * (e.end - e.start), e.end


codecs.register_error("feval-per-byte", per_byte_replace)


class BoundModel:
    """A committed model, read from the store as a replaying auditor reads it.
    A model the reference reader would refuse is out of scope: the refusal's
    detail is that reader's text."""

    def __init__(self, store, revision, subject, spec):
        if not revision.startswith("sha256:") or (subject or {}).get("digest") != revision:
            raise OutOfScope("a refused model (the refusal's detail is the reference reader's text)")
        m = store.manifest(subject)
        if (m.get("artifactType") != MODEL_MANIFEST or m["config"]["mediaType"] != MODEL_CONFIG
                or m.get("annotations", {}).get(MODEL_LAYOUT) != "1"):
            raise OutOfScope("a refused model: not a model artifact of layout 1")
        files = {}
        for layer in m["layers"]:
            path = layer.get("annotations", {}).get(MODEL_PATH, "")
            if layer["mediaType"] not in MODEL_LAYERS or path in files or path.lower().endswith(OTHER_WEIGHTS) or (
                    path.lower().endswith(".safetensors") and path != "model.safetensors"):
                raise OutOfScope("a refused model: file %r" % path)
            files[path] = layer
        if any(f not in files for f in ("config.json", "tokenizer.json", "model.safetensors")):
            raise OutOfScope("a refused model: a file is missing")
        read = lambda name: store.blob(files[name]["digest"], files[name]["size"])
        tok_bytes = read("tokenizer.json")
        if "sha256:" + hashlib.sha256(tok_bytes).hexdigest() != spec["tokenizer"]:
            raise OutOfScope("a refused model: another tokenizer")
        self.config = json.loads(read("config.json"))
        eos = self.config["eos_token_id"]
        self.eos = set(eos if isinstance(eos, list) else [eos])
        self.vocab_size = self.config["vocab_size"]
        self.max_positions = self.config["max_position_embeddings"]
        tok = json.loads(tok_bytes)
        dec = byte_decoder()
        self.pieces = {i: bytes(dec[c] for c in s) for s, i in tok["model"]["vocab"].items()}
        for a in tok.get("added_tokens", []):
            self.pieces[a["id"]] = a["content"].encode()
        self.weights = read("model.safetensors")
        self.sampling = spec["sampling"]
        self._net = None

    def response_text(self, completion):
        """The detokenized completion (PROTOCOL.md "Model-bound rollouts")."""
        if completion and completion[-1] in self.eos:
            completion = completion[:-1]
        b = b"".join(self.pieces.get(i, b"") for i in completion)
        return b.decode("utf-8", "feval-per-byte")

    def provenance(self, item, row, seed):
        """The provenance record of one audited row, in thousandths."""
        rec = {"outcome": "ok", "position": 0, "claimed_token": 0, "expected_token": 0,
               "margin_milli": 0, "near_ties": 0, "near_tie_margin_milli": 0}
        prompt, completion = row.get("prompt_tokens"), row.get("completion_tokens")
        if prompt is None:
            rec["outcome"] = "no_tokens"
            return rec
        want = item["prompt_tokens"]
        if prompt != want:
            rec["outcome"] = "wrong_prompt"
            rec["position"] = next((i for i, (a, b) in enumerate(zip(prompt, want)) if a != b), min(len(prompt), len(want)))
            return rec
        for i, t in enumerate(completion):
            if t >= self.vocab_size:
                rec.update(outcome="bad_tokens", position=i, claimed_token=t)
                return rec
        if len(prompt) + len(completion) > self.max_positions or any(t >= self.vocab_size for t in prompt):
            rec.update(outcome="bad_tokens", position=max(0, self.max_positions - len(prompt)))
            return rec
        tm = torch_model()
        if self._net is None:
            self._net = tm.Qwen3(self.config, self.weights)
        with tm.torch.no_grad():
            c = tm.check(self._net, prompt, completion, seed, self.sampling)
        rec.update(outcome=c["outcome"], position=c["position"], claimed_token=c["claimed_token"],
                   expected_token=c["expected_token"], margin_milli=c["margin_micro"] // 1000,
                   near_ties=c["near_ties"], near_tie_margin_milli=c["near_tie_margin_micro"] // 1000)
        return rec


# ---- replay (PROTOCOL.md §7) ----

def diff(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in set(a) | set(b):
            diff(a.get(k), b.get(k), k if not path else path + "." + k, out)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), out)
        return
    if a != b or type(a) is not type(b):
        out.append(path)


def replay(store, verdict_digest, trusted):
    notes = []
    vm, v = store.artifact(verdict_digest, "verdict")
    if not signed_by(store, verdict_digest, trusted):
        raise Outcome("signature failure")
    inp = v["inputs"]
    # Task and round: intact, with a valid feval signature by the key each carries.
    for d, kind in ((inp["task"], "task"), (inp["round"], "round")):
        store.artifact(d, kind)
    for d in (inp["task"], inp["round"]):
        if not signed_by(store, d, None):
            raise Outcome("signature failure")
    rm, reveal = store.artifact(inp["reveal"], "reveal")
    sub_desc = next((d for d in store.index if d["digest"] == reveal["submission"]), None)
    if sub_desc is not None:
        sm, sub_rec = store.artifact(sub_desc["digest"], "submission")
    commitment_digest = rm["subject"]["digest"]
    cm, com = store.artifact(commitment_digest, "commitment", rm["subject"])
    round_digest = cm["subject"]["digest"]
    _, round_rec = store.artifact(round_digest, "round", cm["subject"])
    task_digest = round_rec["task"]
    tm, _ = store.artifact(task_digest, "task")

    # Reveal checks (PROTOCOL.md §5) that one reveal shows.
    rc = v["reveal_check"]
    miner_pem = store.payload(cm["layers"][1])
    miner_fp, miner_key = fingerprint(miner_pem)
    reason = None
    if miner_fp != com["miner"]:
        reason = "malformed"
    elif miner_fp not in signed_by(store, commitment_digest, {miner_fp: miner_key}):
        reason = "bad_signature"
    elif not within(rc["commit_seen"], round_rec["commit_until"]):
        reason = "commit_late"
    elif miner_fp not in signed_by(store, inp["reveal"], {miner_fp: miner_key}) or (
            sub_desc is not None and miner_fp not in signed_by(store, sub_desc["digest"], {miner_fp: miner_key})):
        reason = "key_mismatch"
    elif (reveal["commitment"], reveal["round"], reveal["miner"]) != (com["commitment"], com["round"], com["miner"]) or com["round"] != round_digest:
        reason = "round_mismatch"
    elif commitment_value(reveal["submission"], reveal["miner"], reveal["round"], bytes.fromhex(reveal["salt"])) != com["commitment"]:
        reason = "commitment_mismatch"
    elif within(rc["reveal_seen"], round_rec["commit_until"]):
        reason = "reveal_early"
    elif not within(rc["reveal_seen"], round_rec["reveal_until"]):
        reason = "reveal_late"
    elif sub_desc is None:
        reason = "submission_missing"

    task_files = store.tree(tm)
    spec = json.loads(task_files["task.json"])
    items = [json.loads(line) for line in task_files["tasks.jsonl"].decode().splitlines()]
    by_id = {it["task_id"]: it for it in items}
    rows = {}
    gate_ok = False
    if reason is None:
        layers = sm["layers"][1:]
        gate_ok = True
        meta = {}
        if len(layers) == 2 and layers[0]["mediaType"] == ROWS_INDEX:
            # Submission format 3 (PROTOCOL.md §6): the index gives every
            # row's id, claim, range and SHA-256; the rows layer is read by
            # range and only audited rows are checked against their hash.
            parsed = parse_rows_index(store.payload(layers[0]), len(items), spec["max_row_bytes"])
            rows_layer = layers[1]
            if parsed is None or parsed[1] != rows_layer["size"] or json.loads(parsed[0]).get("rows") != rows_layer["annotations"].get(TITLE):
                gate_ok = False
            else:
                meta = json.loads(parsed[0])
                for tid, rw, off, ln, h in parsed[2]:
                    if tid not in by_id:
                        gate_ok = False
                        continue
                    rows[tid] = ((rows_layer, off, ln, h), parse_reward(rw))
            files = {}
        else:
            files = store.tree(sm)
            meta = json.loads(files["submission.json"])
        if files and "claims" in meta:
            # Submission format 2 (PROTOCOL.md §6): rows are read through the
            # claims file; a row is decoded only when audited.
            data, claims = files[meta["rows"]], files[meta["claims"]]
            row_lines = data.split(b"\n")
            claim_lines = claims.split(b"\n")
            if row_lines[-1] != b"" or claim_lines[-1] != b"" or len(row_lines) != len(claim_lines):
                gate_ok = False
            for line, cl in zip(row_lines[:-1], claim_lines[:-1]):
                tid, _, rw = cl.decode().partition("\t")
                q = parse_reward(rw)
                if q is None or tid not in by_id or tid in rows or len(line) > spec["max_row_bytes"]:
                    gate_ok = False
                    continue
                rows[tid] = (line, q)
        elif files:
            for line in files[meta["rows"]].decode().splitlines():
                r = json.loads(line)
                q = parse_reward(r["reward_claimed"])
                if q is None or r["task_id"] not in by_id or r["task_id"] in rows or len(line.encode()) > spec["max_row_bytes"]:
                    gate_ok = False
                    continue
                rows[r["task_id"]] = (r, q)
        if len(rows) != len(items):
            gate_ok = False
        if not gate_ok:
            reason = "gate_failed"
            notes.append("gate findings taken as recorded")
    if reason is None and rc.get("reason") in ("copy", "double_reveal"):
        reason = rc["reason"]  # round-wide observations, taken as recorded

    out = {"protocol": "rollouts", "submission": reveal["submission"],
           "inputs": {"task": task_digest, "round": round_digest, "commitment": commitment_digest,
                      "commitment_value": com["commitment"], "reveal": inp["reveal"], "miner": com["miner"]},
           "reveal_check": {"status": "accepted" if reason is None else "rejected",
                            "commit_seen": rc["commit_seen"], "reveal_seen": rc["reveal_seen"]},
           "checkers": spec["checkers"], "rows": 0, "traces": [], "sequence": v["sequence"]}
    if reason is not None:
        out["reveal_check"]["reason"] = reason
        out["status"], out["reason"] = "rejected", reason
        if reason == "gate_failed" and "violations" in v:
            out["violations"] = v["violations"]
    else:
        b = derive_beacon(v["audit"]["beacon"], round_rec, rc["reveal_seen"])
        if b.pop("_needs_bls", False):
            notes.append("drand signature not checked (BLS12-381)")
        out["rows"] = len(rows)
        out["claimed_score"] = fmt(sum((q for _, q in rows.values()), Fraction(0)) / len(rows))
        seed = audit_seed(b["source"], b["value"], com["commitment"], reveal["submission"])
        full = v["audit"]["full"]
        ids = [it["task_id"] for it in items] if full else sample(seed, [it["task_id"] for it in items], spec["audit_rows"])
        audit = {"beacon": b, "seed": seed.hex(), "full": full, "sample_size": len(ids), "rows": [],
                 "mismatches": [], "undetermined": []}
        out["audit"] = audit
        rows_data = {}
        for response, _ in rows.values():
            if isinstance(response, tuple):  # format 3: verified whole only by a full audit
                layer = response[0]
                rows_data[0] = store.blob(layer["digest"], layer["size"]) if full else store.unverified(layer["digest"], layer["size"])
                break
        model, failures = None, []
        if "model" in spec:
            # The model check (PROTOCOL.md §6 "Model-bound rollouts"): a
            # model the reference reader refuses is out of scope.
            model = BoundModel(store, meta.get("model_revision", ""), sm.get("subject"), spec["model"])
            out["model_check"] = {"revision": meta["model_revision"], "status": "accepted"}
        for i in ids:
            r, claimed = rows[i]
            if isinstance(r, tuple):  # format 3: the row's bytes must hash to its entry
                _, off, ln, h = r
                line = rows_data[0][off:off + ln]
                r = line[:-1] if hashlib.sha256(line).digest() == h and line.endswith(b"\n") else b"\xff"
            if isinstance(r, bytes):  # formats 2 and 3: the row must repeat its claims line
                try:
                    r = json.loads(r)
                    ok = r["task_id"] == i and parse_reward(r["reward_claimed"]) == claimed and fmt(claimed) == r["reward_claimed"]
                except (ValueError, KeyError, TypeError):
                    ok = False
                # A row is a text row or a token row (GATES.md), and a token
                # row only where the task binds rows to a model.
                tokens = ok and "prompt_tokens" in r and "completion_tokens" in r
                if not ok or tokens == ("response" in r) or (tokens and model is None):
                    audit["rows"].append({"task_id": i, "claimed": fmt(claimed), "outcome": "malformed"})
                    audit["mismatches"].append(i)
                    continue
            ar = {"task_id": i, "claimed": fmt(claimed)}
            response = r.get("response")
            if model is not None:
                # Provenance before the reward: the seed's inputs are the
                # round's digest, the task id and the committing miner.
                prov = model.provenance(by_id[i], r, {"round": round_digest, "task_id": i, "miner": com["miner"]})
                ar["provenance"] = prov
                if prov["outcome"] != "ok":
                    ar["outcome"] = "provenance"
                    failures.append(i)
                    audit["rows"].append(ar)
                    continue
                response = model.response_text(r["completion_tokens"])
            try:
                got = row_reward(by_id[i], response)  # OutOfScope propagates
            except CheckerError:
                out["status"], out["reason"] = "infra_error", "checker_error"
                break
            ar["recomputed"] = fmt(got)
            if got == claimed:
                ar["outcome"] = "match"
            else:
                ar["outcome"] = "mismatch"
                audit["mismatches"].append(i)
            audit["rows"].append(ar)
        if failures:
            audit["provenance_failures"] = failures
        if out.get("status") == "infra_error":
            pass
        elif failures:
            out["status"], out["reason"] = "rejected", "provenance_mismatch"
        elif audit["mismatches"]:
            out["status"], out["reason"] = "rejected", "reward_mismatch"
        else:
            out["status"] = "passed"

    record = canonical(out)
    man = {"annotations": {CREATED: vm["annotations"][CREATED]}, "artifactType": artifact_type("verdict"),
           "config": {"data": "e30=", "digest": EMPTY_DIGEST, "mediaType": EMPTY, "size": 2},
           "layers": [{"annotations": {TITLE: "record.json"}, "digest": "sha256:" + hashlib.sha256(record).hexdigest(),
                       "mediaType": artifact_type("verdict"), "size": len(record)}],
           "mediaType": MANIFEST, "schemaVersion": 2, "subject": vm["subject"]}
    want_subject = sub_desc["digest"] if sub_desc is not None else inp["reveal"]
    paths = [] if (vm.get("subject") or {}).get("digest") == want_subject else ["(subject)"]
    same = "sha256:" + hashlib.sha256(canonical(man)).hexdigest() == verdict_digest
    if same and not paths:
        return "identical", notes
    diff(v, json.loads(record), "", paths)
    if not same and paths in ([], ["(subject)"]):
        paths.append("(manifest)")
    return "differs at " + " ".join(sorted(paths)), notes


def read_header(path):
    h = {"trust": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#") or not line:
                continue
            k, _, val = line.partition(": ")
            if k == "trust":
                h["trust"].append(val)
            else:
                h[k] = val
    return h


def run_vector(conf, name):
    h = read_header(os.path.join(conf, name, "vector.txt"))
    if h.get("protocol") != "rollouts":
        raise OutOfScope("protocol %s" % h.get("protocol"))
    trusted = {}
    for k in h["trust"]:
        with open(os.path.join(conf, k), "rb") as f:
            fp, key = fingerprint(f.read())
        trusted[fp] = key
    store = Store(os.path.join(conf, name, "store"))
    try:
        got, notes = replay(store, h["verdict"], trusted)
    except Outcome as e:
        got, notes = str(e), []
    return got, h["expect"], notes


def check_reward_vectors(testdata):
    """Checks this verifier's reward rules against the normative vector files
    (REWARDS.md): every math pair of plain numbers, and every instruction of
    the five implemented types. Returns (checked, failures)."""
    checked, failures = 0, []
    with open(os.path.join(testdata, "math_equivalence.jsonl"), encoding="utf-8") as f:
        for line in f:
            c = json.loads(line)
            g, a = plain_number(c["gold"]), plain_number(c["answer"])
            if g is None or a is None or "fuel" in c:  # §2.5 holds under the default fuel
                continue
            checked += 1
            want = "equal" if g == a else "not_equal"
            if c["expected"] != want:
                failures.append("math %r vs %r: vector says %s, plain-number rule %s" % (c["gold"], c["answer"], c["expected"], want))
    with open(os.path.join(testdata, "math_extract.jsonl"), encoding="utf-8") as f:
        for line in f:
            c = json.loads(line)
            checked += 1
            got = extract(c["response"])
            if got != (c["answer"], c["method"]):
                failures.append("extract %r: vector says %r by %s, rules give %r by %s" % (c["response"], c["answer"], c["method"], got[0], got[1]))
    with open(os.path.join(testdata, "ifeval_vectors.jsonl"), encoding="utf-8") as f:
        for line in f:
            c = json.loads(line)
            if "expected_strict" not in c:
                continue  # a task error (expected_error): not a reward
            for iid, kw, want in zip(c["instruction_id_list"], c["kwargs"], c["expected_strict"]):
                try:
                    got = follows(iid, kw, c["response"])
                except OutOfScope:
                    continue
                checked += 1
                if got != want:
                    failures.append("%s on %r (%s): vector says %s" % (iid, c["response"], c.get("note", ""), want))
    return checked, failures


# ---- reading a verdict for consensus (CONSENSUS.md §8.2) ----

class Schemas:
    """The subset of JSON Schema docs/schemas use (FORMAT.md §7.6)."""

    def __init__(self, root):
        self.files = {}
        for name in os.listdir(root):
            if name.endswith(".json"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    self.files[name] = json.load(f)

    def validate(self, name, v):
        return self._check(name, self.files[name], v)

    def _resolve(self, file, ref):
        f, _, frag = ref.partition("#")
        f = f or file
        node = self.files[f]
        for p in frag.strip("/").split("/"):
            if p:
                node = node[p]
        return f, node

    def _check(self, file, sch, v):
        if "$ref" in sch:
            f, target = self._resolve(file, sch["$ref"])
            if not self._check(f, target, v):
                return False
        if "const" in sch and not _same(sch["const"], v):
            return False
        if "enum" in sch and not any(_same(x, v) for x in sch["enum"]):
            return False
        t = sch.get("type")
        if t is not None and not _of_type(t, v):
            return False
        if isinstance(v, str):
            if "pattern" in sch and not re.search(sch["pattern"], v):
                return False
            if len(v) < sch.get("minLength", 0):
                return False
        if isinstance(v, int) and not isinstance(v, bool):
            if "minimum" in sch and v < sch["minimum"]:
                return False
            if "maximum" in sch and v > sch["maximum"]:
                return False
        if isinstance(v, list):
            if len(v) < sch.get("minItems", 0) or len(v) > sch.get("maxItems", len(v)):
                return False
            if "items" in sch and not all(self._check(file, sch["items"], x) for x in v):
                return False
        if isinstance(v, dict):
            if any(r not in v for r in sch.get("required", [])):
                return False
            props = sch.get("properties", {})
            for k, x in v.items():
                if k not in props:
                    if sch.get("additionalProperties") is False:
                        return False
                    continue
                if not self._check(file, props[k], x):
                    return False
        return True


def _of_type(t, v):
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "boolean":
        return isinstance(v, bool)
    return isinstance(v, {"object": dict, "array": list, "string": str}[t])


def _same(a, b):
    return type(a) == type(b) and a == b


def _ints_fit(v, path=""):
    """Every integer member fits a signed 64-bit integer; sequence is unsigned."""
    if isinstance(v, dict):
        return all(_ints_fit(x, k if not path else path + "." + k) for k, x in v.items())
    if isinstance(v, list):
        return all(_ints_fit(x, path) for x in v)
    if isinstance(v, int) and not isinstance(v, bool):
        if path == "sequence":
            return 0 <= v < 1 << 64
        return -(1 << 63) <= v < 1 << 63
    return True


def parse_rational(s):
    """A canonical rational (CONSENSUS.md §1): reduced, no sign on zero."""
    m = re.fullmatch(r"(-?)(0|[1-9][0-9]*)(?:/([1-9][0-9]*))?", s)
    if not m or (m.group(3) is not None and (int(m.group(3)) < 2 or m.group(2) == "0")) or (m.group(1) and m.group(2) == "0"):
        return None
    q = Fraction(s)
    return q if fmt(q) == s.lstrip("-") or (s.startswith("-") and fmt(-q) == s[1:]) else None


def read_for_consensus(record, round_protocol, schemas):
    """Returns (exclude, status, score, sequence, reveal, submission)."""
    unreadable = ("malformed", "", "0", 0, "", "")
    try:
        v = json.loads(record.encode("utf-8"), parse_float=_no_float, object_pairs_hook=_no_dupes)
    except ValueError:
        return unreadable
    if canonical(v) != record.encode("utf-8"):
        return unreadable
    if not isinstance(v, dict) or not schemas.validate("verdict-head.schema.json", v) or not (0 <= v["sequence"] < 1 << 64):
        return unreadable
    named = (v["sequence"], v["inputs"]["reveal"], v["submission"])
    malformed = ("malformed", "", "0") + named
    if v["protocol"] != round_protocol:
        return malformed
    if not schemas.validate("verdict-%s.schema.json" % round_protocol, v) or not _ints_fit(v):
        return malformed
    score = None
    if round_protocol == "rollouts":
        if "claimed_score" in v:
            score = parse_reward(v["claimed_score"])
            if score is None:
                return malformed
        for row in v.get("audit", {}).get("rows", []):
            if parse_reward(row["claimed"]) is None or ("recomputed" in row and parse_reward(row["recomputed"]) is None):
                return malformed
    elif round_protocol == "scenarios":
        if any(sc["passed"] > sc["total"] for sc in v["scenarios"]):
            return malformed
        if "score" in v:
            score = parse_rational(v["score"])
            if score is None or score < 0 or score > v["max_score"]:
                return malformed
    if v["status"] != "passed":
        return ("", v["status"], "0") + named
    if score is None:  # a passed verdict without a score (an optimizer verdict)
        return malformed
    return ("", "passed", fmt(score)) + named


def check_reading_vectors(path, schema_dir):
    schemas = Schemas(schema_dir)
    with open(path, encoding="utf-8") as f:
        vectors = json.load(f)
    failures = []
    for vec in vectors:
        e = vec["expect"]
        want = (e["exclude"], e["status"], e["score"], e["sequence"], e["reveal"], e["submission"])
        got = read_for_consensus(vec["record"], vec["round_protocol"], schemas)
        if got != want:
            failures.append("%s: read as %r, vector says %r" % (vec["name"], got, want))
    return len(vectors), failures


def main(argv):
    if len(argv) == 3 and argv[1] == "--reward-vectors":
        checked, failures = check_reward_vectors(argv[2])
        for f in failures:
            print("FAIL " + f)
        print("checked %d reward vectors, %d failures" % (checked, len(failures)))
        return 1 if failures or checked == 0 else 0
    if len(argv) == 4 and argv[1] == "--reading-vectors":
        checked, failures = check_reading_vectors(argv[2], argv[3])
        for f in failures:
            print("FAIL " + f)
        print("checked %d reading vectors, %d failures" % (checked, len(failures)))
        return 1 if failures or checked == 0 else 0
    if len(argv) != 2:
        usage = __doc__.strip().splitlines()
        at = next(i for i, line in enumerate(usage) if line.startswith("Usage:"))
        print("\n".join(usage[at:at + 3]), file=sys.stderr)
        return 2
    conf = argv[1]
    failed = 0
    for name in sorted(os.listdir(conf)):
        if not os.path.isfile(os.path.join(conf, name, "vector.txt")):
            continue
        try:
            got, want, notes = run_vector(conf, name)
        except OutOfScope as e:
            print("SKIP %s: %s" % (name, e))
            continue
        if any(n.startswith("drand signature") for n in notes) and want == "beacon failure":
            print("SKIP %s: the expected failure is the drand signature's BLS12-381 check" % name)
            continue
        if got == want:
            print("PASS %s: %s%s" % (name, got, " (" + "; ".join(notes) + ")" if notes else ""))
        else:
            failed += 1
            print("FAIL %s: got %s, header expects %s" % (name, got, want))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
