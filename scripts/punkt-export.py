#!/usr/bin/python3
"""Export the parameters of NLTK's English Punkt model into plain text files.

Usage: scripts/punkt-export.py english.pickle OUTDIR

english.pickle is NLTK's trained English Punkt model (nltk_data, package
"punkt", PY3/english.pickle). It is read once, here, by a restricted unpickler
that builds only sets, ints, dicts and inert placeholder objects: no class of
NLTK or any other module is imported or called. The output uses the layout of
NLTK's punkt_tab package: abbrev_types.txt and sent_starters.txt (one type a
line), collocations.tab (two types a line, tab-separated) and
ortho_context.tab (type and flags a line, tab-separated), each sorted by code
point, UTF-8, lines ending in "\\n". scoring/ifeval embeds these files; nothing
is unpickled at run time.
"""
import collections
import os
import pickle
import sys


class _Inert:
    """Placeholder for the model's classes: keeps state, runs no code."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)


_PUNKT = ("PunktParameters", "PunktToken", "PunktSentenceTokenizer", "PunktLanguageVars")
_ALLOWED = {("builtins", "set"): set, ("builtins", "int"): int,
            ("collections", "defaultdict"): collections.defaultdict}


class _Restricted(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "nltk.tokenize.punkt" and name in _PUNKT:
            return type(name, (_Inert,), {})
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        model = _Restricted(f).load()
    p = model._params
    for t in list(p.abbrev_types) + list(p.sent_starters) + [a for c in p.collocations for a in c] + list(p.ortho_context):
        if "\n" in t or "\t" in t:
            raise SystemExit(f"type {t!r} cannot be written one a line")
    os.makedirs(out, exist_ok=True)

    def write(name, lines):
        with open(os.path.join(out, name), "w", encoding="utf-8", newline="\n") as f:
            for line in sorted(lines):
                f.write(line + "\n")

    write("abbrev_types.txt", p.abbrev_types)
    write("sent_starters.txt", p.sent_starters)
    write("collocations.tab", [a + "\t" + b for a, b in p.collocations])
    write("ortho_context.tab", [k + "\t" + str(v) for k, v in p.ortho_context.items() if v])


main()
