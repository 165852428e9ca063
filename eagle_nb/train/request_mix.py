"""The drafter's broad request stream (recipe 3): tens of thousands of distinct user turns in the
shares a chat endpoint sees, drawn from packaged corpora (corpora.py, stored by index) and from
forms written for this project crossed with slot fillers (stored as text).

Shares, by category and language (each stream element draws one, then a distinct request of it):
- chat 26%: Chit Chat questions (English, MIT), chatterbot first turns (English), the recipe's
  everyday-chat forms (broad_seeds.EN_CHAT*);
- explanation 13%: English topic forms (broad_seeds.EN_FORMS x EN_TOPICS, chat_seeds concepts);
- code 17%: standard-library functions to explain, document, test or port (PSF License) and
  programming questions (broad_seeds, chat_seeds templates);
- arithmetic 9%: word problems with steps and fresh numbers (chat_seeds.arithmetic);
- Spanish, French, German, Italian, Portuguese 7% each: the forms of broad_seeds.FOREIGN with its
  topics and with country names in that language (babel's CLDR territory names), country forms,
  chatterbot first turns in that language, and requests to translate a Chit Chat message into it,
  each asked in that language.
The evaluation prompts (data/eval_prompts.jsonl) stay disjoint (tests/train/test_chat_recipe.py).
Knows nothing about tokenizers or models.
"""
from __future__ import annotations

import random

from eagle_nb.train import broad_seeds as B
from eagle_nb.train import chat_seeds as C
from eagle_nb.train import corpora

LANGS = ("es", "fr", "de", "it", "pt")
MAX_CHARS = 2000        # a longer user turn (a few corpus records are pages long) is skipped
SHARES = {"chat": 26, "explanation": 13, "code": 17, "arithmetic": 9, **{lang: 7 for lang in LANGS}}
COUNTRY_FORMS = {
    "es": ["¿Qué lugares merece la pena visitar en {c}?", "¿Cómo es la comida típica de {c}?",
           "Háblame de la historia de {c}.", "¿Qué idiomas se hablan en {c}?",
           "Describe el clima de {c} en un párrafo corto.", "Dame tres datos curiosos sobre {c}."],
    "fr": ["Quels endroits faut-il visiter en {c} ?", "Comment est la cuisine typique de ce pays : {c} ?",
           "Raconte-moi l'histoire de ce pays : {c}.", "Quelles langues parle-t-on dans ce pays : {c} ?",
           "Décris le climat de ce pays en un court paragraphe : {c}.", "Donne-moi trois faits curieux sur ce pays : {c}."],
    "de": ["Welche Orte sollte man in {c} besuchen?", "Wie ist die typische Küche von {c}?",
           "Erzähl mir von der Geschichte von {c}.", "Welche Sprachen spricht man in {c}?",
           "Beschreibe das Klima von {c} in einem kurzen Absatz.", "Nenne drei überraschende Fakten über {c}."],
    "it": ["Quali luoghi vale la pena visitare in questo paese: {c}?", "Com'è la cucina tipica di questo paese: {c}?",
           "Raccontami la storia di questo paese: {c}.", "Quali lingue si parlano in questo paese: {c}?",
           "Descrivi il clima di questo paese in un breve paragrafo: {c}.", "Dimmi tre curiosità su questo paese: {c}."],
    "pt": ["Que lugares vale a pena visitar neste país: {c}?", "Como é a comida típica deste país: {c}?",
           "Conte-me a história deste país: {c}.", "Que línguas se falam neste país: {c}?",
           "Descreva o clima deste país num parágrafo curto: {c}.", "Dê-me três curiosidades sobre este país: {c}."],
}
# modules whose small public functions are shown to the target (CPython's standard library, PSF
# License): broad_seeds.STDLIB and more, 4 to 30 lines each
STDLIB = B.STDLIB + (
    "argparse", "ast", "collections", "configparser", "email.utils", "gettext", "locale", "logging",
    "mimetypes", "ntpath", "pathlib", "pprint", "quopri", "reprlib", "sched", "tarfile", "tempfile",
    "tokenize", "urllib.parse", "wave", "zipfile", "enum", "dataclasses", "contextlib", "shutil", "os",
    "subprocess", "traceback", "warnings", "numbers", "_pydecimal", "graphlib", "netrc", "plistlib",
    "pydoc", "inspect", "typing", "http.cookies", "imaplib", "ftplib", "mailbox", "zipapp", "sysconfig",
    "platform", "optparse", "getopt", "gzip", "hashlib", "hmac", "codecs", "dis", "doctest", "filecmp",
    "fileinput", "linecache", "pkgutil", "poplib", "pyclbr", "py_compile", "runpy", "selectors",
    "socketserver", "stat", "symtable", "tabnanny", "timeit", "trace", "tracemalloc", "unittest.util",
    "wsgiref.util", "xml.dom.minidom", "ssl", "socket", "threading", "queue", "json.encoder")
TRANSLATE_INTO = {"es": "Traduce al español: {s}", "fr": "Traduis en français : {s}",
                  "de": "Übersetze ins Deutsche: {s}", "it": "Traduci in italiano: {s}",
                  "pt": "Traduza para o português: {s}"}


def countries(lang: str) -> list[str]:
    """Country and territory names in `lang` (CLDR, via babel), in code order."""
    from babel import Locale
    names = Locale(lang).territories
    return [names[k] for k in sorted(names) if len(k) == 2 and k.isalpha()]


def functions(max_lines: int = 30) -> list[str]:
    """Source of every public function of `STDLIB` with 4..max_lines lines, distinct, in order."""
    return B.stdlib_functions(max_lines, STDLIB, distinct=True)


def _text(source: dict) -> str:
    if "corpus" in source:
        return corpora.record(source["corpus"], source["index"], source.get("lang"))
    return source["text"]


def _draw(cat: str, rng: random.Random, functions: list[str], names: dict) -> dict:
    """One request of category `cat`: {"text"} or {"corpus", "index"[, "lang"]}, plus the
    translation's template when it wraps a corpus record."""
    if cat == "chat":
        u = rng.random()
        if u < 0.6:
            return {"corpus": "chitchat", "index": rng.randrange(len(corpora.chitchat_questions()))}
        if u < 0.7:
            return {"corpus": "chatterbot", "lang": "en",
                    "index": rng.randrange(len(corpora.chatterbot_questions("en")))}
        return {"text": B.broad_request(_only(rng, "chat"), functions, C.arithmetic)[0]}
    if cat in ("explanation", "code"):
        if cat == "explanation" and rng.random() < 0.3:
            return {"text": rng.choice(C.CONCEPT_TEMPLATES).format(c=rng.choice(C.CONCEPTS))}
        if cat == "code":
            u = rng.random()
            if u < 0.3:
                return {"text": rng.choice(C.CODE_TEMPLATES).format(lang=rng.choice(C.CODE_LANGS),
                                                                    task=rng.choice(C.CODE_TASKS))}
            if u < 0.9:
                return {"text": rng.choice(B.CODE_FORMS).format(src=rng.choice(functions))}
        return {"text": B.broad_request(_only(rng, cat), functions, C.arithmetic)[0]}
    if cat == "arithmetic":
        return {"text": C.arithmetic(rng)}
    forms, topics, chat = B.FOREIGN[cat]
    u = rng.random()
    if u < 0.25:
        return {"text": rng.choice(forms).format(t=rng.choice(topics))}
    if u < 0.55:
        return {"text": rng.choice(COUNTRY_FORMS[cat]).format(c=rng.choice(names[cat]))}
    if u < 0.65:
        rows = corpora.chatterbot_questions(cat)
        return {"corpus": "chatterbot", "lang": cat, "index": rng.randrange(len(rows))} if rows else \
            {"text": rng.choice(chat)}
    if u < 0.70:
        return {"text": rng.choice(chat)}
    i = rng.randrange(len(corpora.chitchat_questions()))
    return {"corpus": "chitchat", "index": i, "wrap": TRANSLATE_INTO[cat]}


class _only:
    """A random source whose first `choices` call returns one fixed kind (broad_request picks its
    kind with `choices`); everything after draws from the wrapped generator."""

    def __init__(self, rng: random.Random, kind: str):
        self._rng, self._kind, self._first = rng, kind, True

    def choices(self, population, weights=None, **kw):
        if self._first:
            self._first = False
            return [self._kind]
        return self._rng.choices(population, weights, **kw)

    def random(self):
        return self._rng.random()

    def choice(self, seq):
        return self._rng.choice(seq)

    def randrange(self, *a):
        return self._rng.randrange(*a)

    def randint(self, a, b):
        return self._rng.randint(a, b)


def request_text(row: dict) -> str:
    """The user turn a stored request row stands for (corpus records are looked up)."""
    text = _text(row["source"])
    return row["source"]["wrap"].format(s=text) if "wrap" in row["source"] else text


def mixed_requests(n: int, seed: int = 0, exclude: set[str] = frozenset()) -> list[dict]:
    """The first `n` requests of the stream for `seed`: distinct rows {"source", "category",
    "language", "messages"}; texts in `exclude` are skipped (the recipe's older requests)."""
    rng, funcs = random.Random(seed), functions()
    names = {lang: countries(lang) for lang in LANGS}
    cats, weights = list(SHARES), list(SHARES.values())
    out, seen, misses = [], set(exclude), 0
    while len(out) < n:
        cat = rng.choices(cats, weights)[0]
        source = _draw(cat, rng, funcs, names)
        row = {"source": source}
        text = request_text(row)
        if text in seen or len(text) > MAX_CHARS:
            misses += 1
            if misses > 50 * n + 1000:
                raise ValueError(f"the request stream ran out of distinct requests after {len(out)} of {n}")
            continue
        seen.add(text)
        lang = cat if cat in LANGS else "en"
        out.append({"source": source, "category": "language" if cat in LANGS else cat, "language": lang,
                    "messages": [{"role": "user", "content": text}]})
    return out
