#!/usr/bin/python3
"""Convert the public Math-Verify project's test cases into feval test data.

Usage: scripts/mathverify-upstream.py GIT_DIR COMMIT > scoring/testdata/mathverify_upstream.json

GIT_DIR is a clone of https://github.com/huggingface/Math-Verify. The tests are
read with git (no checkout needed) and parsed with Python's ast module; nothing
from the project is imported or run. Every parametrized case of a test that
compares a gold text with a predicted text becomes one case; tests of other
interfaces are listed under "excluded" with the reason. Run once per upstream
commit; the output is committed.
"""
import ast
import json
import math
import subprocess
import sys

# Test files holding (gold, pred, expected) cases, and the parse/verify options
# each test function passes (beyond its parametrized arguments).
FILES = [
    "tests/test_all.py",
    "tests/test_boxed.py",
    "tests/test_numina_cases.py",
    "tests/test_open_thoughts.py",
    "tests/test_strict.py",
    "tests/test_yujianll.py",
]

EXCLUDED = [
    {"test": "tests/test_all.py::test_precision",
     "reason": "calls sympy_expr_eq on sympy objects with float rounding; its one string case is converted as test_precision#0"},
    {"test": "tests/test_configs.py",
     "reason": "tests Math-Verify's extraction configuration objects (priorities, normalization switches), which feval does not have"},
    {"test": "tests/test_string_extraction.py",
     "reason": "tests multiple-choice letter extraction (StringExtractionConfig), not an answer kind of feval"},
    {"test": "tests/test_timeout.py",
     "reason": "tests wall-clock timeouts with mocked slow functions; feval bounds work by fuel"},
    {"test": "tests/test_raise_on_error.py",
     "reason": "tests exception propagation with a mocked comparison"},
]

SAFE = {"__builtins__": {}, "math": math}


def value(node):
    """Evaluate a literal test argument (f-strings over math allowed)."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return eval(compile(ast.Expression(node), "<case>", "eval"), SAFE)


def call_options(fn):
    """Keyword options of the compare_strings / verify call in a test body."""
    opts = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "compare_strings":
            for kw in n.keywords:
                if isinstance(kw.value, ast.Name):
                    opts[kw.arg] = "$" + kw.value.id  # taken from the case
                else:
                    opts[kw.arg] = ast.literal_eval(kw.value)
            return "compare_strings", opts
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "verify":
            return "verify", opts
    return None, opts


def cases_of(path, src):
    tree = ast.parse(src)
    out = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        api, opts = call_options(fn)
        for dec in fn.decorator_list:
            if not (isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize"):
                continue
            names = [s.strip() for s in ast.literal_eval(dec.args[0]).split(",")]
            for i, row in enumerate(dec.args[1].elts):
                vals = dict(zip(names, [value(e) for e in row.elts]))
                expected = vals.get("expected", vals.get("result"))
                case = {
                    "id": f"{path}::{fn.name}#{i}",
                    "gold": vals["gold"],
                    "pred": vals["pred"],
                    "expected": int(expected),
                }
                o = {}
                for k, v in opts.items():
                    if isinstance(v, str) and v.startswith("$"):
                        v = vals[v[1:]]
                    o[k] = v
                if api == "verify":
                    o["api"] = "parse+verify defaults"
                case["options"] = o
                out.append(case)
        if fn.name == "test_precision":
            # the one string comparison in an otherwise sympy-level test
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "compare_strings":
                    out.append({
                        "id": f"{path}::{fn.name}#0",
                        "gold": ast.literal_eval(n.args[0]),
                        "pred": ast.literal_eval(n.args[1]),
                        "expected": 1,
                        "options": {kw.arg: ast.literal_eval(kw.value) for kw in n.keywords},
                    })
    return out


def main():
    git_dir, commit = sys.argv[1], sys.argv[2]
    cases = []
    for path in FILES:
        src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                             check=True, capture_output=True, text=True).stdout
        cases.extend(cases_of(path, src))
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    w = sys.stdout.write
    w("{\n")
    w('"source": ' + json.dumps({
        "repository": "https://github.com/huggingface/Math-Verify",
        "commit": commit,
        "license": "Apache-2.0 (the repository's LICENCE file; the test files' headers carry an MIT notice, Copyright (c) 2024 The HuggingFace Team)",
        "files": FILES,
        "converter": "scripts/mathverify-upstream.py",
    }, ensure_ascii=False, sort_keys=True) + ",\n")
    w('"excluded": [\n' + ",\n".join(json.dumps(e, ensure_ascii=False, sort_keys=True) for e in EXCLUDED) + "\n],\n")
    w('"cases": [\n' + ",\n".join(json.dumps(c, ensure_ascii=False, sort_keys=True) for c in cases) + "\n]\n")
    w("}\n")


main()
