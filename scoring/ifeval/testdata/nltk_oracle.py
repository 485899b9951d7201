"""Reference oracle for scoring/ifeval: IFEval's text measures computed by NLTK.

Run by the Go tests with Debian's /usr/bin/python3 and python3-nltk:

  nltk_oracle.py MODEL_DIR < texts.jsonl > results.jsonl
  nltk_oracle.py --chars > flags.bin

MODEL_DIR holds the English Punkt model in the punkt_tab layout
(scoring/ifeval/punkt/english); it is loaded into nltk's PunktParameters, the
object IFEval's pickled tokenizer carries, so NLTK's own
PunktSentenceTokenizer applies the same model as the Go port. For each input
line {"text": ...} one line is written with:

  sentences  PunktSentenceTokenizer.tokenize(text)            (count_sentences)
  words      len(RegexpTokenizer(r"\\w+").tokenize(text))      (count_words)
  tokens     nltk.word_tokenize(text) (the Treebank tokens of each sentence)
  capital    the tokens that are str.isupper()
             (capital_word_frequency; word_tokenize's sentence split uses the
             same model)
  isupper, islower   text.isupper(), text.islower()  (change_case checks)

--chars writes one byte per code point 0..0x10FFFF with bit 0 \\w, 1 \\d,
2 isupper, 3 islower, 4 titlecase (Lt), 5 \\s, 6 assigned (category != Cn).
"""
import json
import os
import sys
import unicodedata

if sys.argv[1:] == ["--chars"]:
    import re
    w, d, s = re.compile(r"\w"), re.compile(r"\d"), re.compile(r"\s")
    out = bytearray(0x110000)
    for c in range(0x110000):
        ch = chr(c)
        out[c] = (bool(w.match(ch)) | bool(d.match(ch)) << 1 | ch.isupper() << 2 | ch.islower() << 3
                  | (unicodedata.category(ch) == "Lt") << 4 | bool(s.match(ch)) << 5 | (unicodedata.category(ch) != "Cn") << 6)
    sys.stdout.buffer.write(bytes(out))
    sys.exit(0)

from nltk.tokenize import RegexpTokenizer
from nltk.tokenize.destructive import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer


def lines(path):
    with open(path, encoding="utf-8", newline="") as f:
        for line in f.read().split("\n"):
            if line:
                yield line


model = sys.argv[1]
params = PunktParameters()
params.abbrev_types = set(lines(os.path.join(model, "abbrev_types.txt")))
params.sent_starters = set(lines(os.path.join(model, "sent_starters.txt")))
params.collocations = {tuple(l.split("\t")) for l in lines(os.path.join(model, "collocations.tab"))}
for l in lines(os.path.join(model, "ortho_context.tab")):
    typ, flags = l.split("\t")
    params.ortho_context[typ] = int(flags)
sentences = PunktSentenceTokenizer(params)
words = RegexpTokenizer(r"\w+")
treebank = NLTKWordTokenizer()

for line in sys.stdin:
    text = json.loads(line)["text"]
    sents = sentences.tokenize(text)
    tokens = [t for s in sents for t in treebank.tokenize(s)]
    print(json.dumps({
        "sentences": sents,
        "words": len(words.tokenize(text)),
        "tokens": tokens,
        "capital": [t for t in tokens if t.isupper()],
        "isupper": text.isupper(),
        "islower": text.islower(),
    }, ensure_ascii=False))
