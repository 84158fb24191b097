"""Blind corpora: submissions written from the student bundle alone, to validate the grading.

A bug catalog (autograder/mutants/) is written by the people who wrote the solution, from the
solution's text, and finds the bugs its authors imagine; students' bugs come from the handout's
text. Each assignment's corpus, `autograder/corpus/<id>/`, was written by someone given only what a
student gets (handout, stubs, public tests, `kvlab`), never the solutions, hidden tests or catalogs:

- `bases/<style>/`: complete, correct submissions in styles unlike the reference's;
- `bugs.json`: single-bug submissions, each a list of exact text replacements in one file of one
  base (each `old` occurring exactly once), with the bug in one line, the stated rule it breaks
  (quoted, with where it is stated), the task whose points it should cost, and `expect`: words any
  one of which a helpful failure message contains, naming the bug's concept for the student.
  `public_blind`, when not empty, says why no public test can see the bug.

tests/suites/test_corpus.py grades every entry: each base gets full marks; each bug loses points in the
hidden suite, fails a public test (unless `public_blind`), and the first hidden test it fails names
its concept. Every rule sentence of the stubs' docstrings (`stated_rules`) must be broken by some
bug of the corpus (`breaks`) or quoted by a catalog mutant's `rule`: that bug being caught is what
shows a test checks the rule (`not_rules.json` lists, with reasons, sentences that state none). The corpora
are never shipped: neither the student bundle nor the Gradescope package holds this folder.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder import mutants

HERE = Path(__file__).resolve().parent

# A sentence of a stub's docstring that states a rule a test can check holds one of these.
RULE_WORDS = re.compile(r"\b(raises?|must|never|in both cases|one round trip|reads? no|bool is not|only|exactly|"
                        r"always|at most|at least)\b", re.IGNORECASE)
# A quoted fragment of an entry's `rule` shorter than this is too common to name one sentence.
MIN_QUOTE = 12


@dataclass(frozen=True)
class Bug:
    """One single-bug submission of a corpus (see the module docstring for the fields)."""

    name: str
    base: str
    file: str
    replacements: tuple[tuple[str, str], ...]
    bug: str
    rule: str
    task: str
    expect: tuple[str, ...]
    public_blind: str = ""

    def breaks(self, sentence: str) -> bool:
        """Whether the entry's `rule` quotes (part of) `sentence`."""
        return quotes_sentence(self.rule, sentence)

    def names_concept(self, message: str) -> bool:
        """Whether `message` contains one of the `expect` words (case-insensitively)."""
        folded = message.casefold()
        return any(word.casefold() in folded for word in self.expect)


class CorpusError(ValueError):
    """A corpus entry that does not apply to its base (an `old` missing or repeated), or is malformed."""


def folder(assignment: str) -> Path:
    """autograder/corpus/<assignment>/."""
    return HERE / assignment


def bases(assignment: str) -> dict[str, Path]:
    """The correct submissions of the corpus, by style name."""
    return {path.name: path for path in sorted((folder(assignment) / "bases").iterdir()) if path.is_dir()}


def bugs(assignment: str) -> list[Bug]:
    """The corpus's bugs, in bugs.json's order; CorpusError for a malformed entry or a repeated name."""
    entries = json.loads((folder(assignment) / "bugs.json").read_text(encoding="utf-8"))
    found: list[Bug] = []
    for entry in entries:
        try:
            bug = Bug(**{**entry, "replacements": tuple(tuple(pair) for pair in entry["replacements"]),
                         "expect": tuple(entry["expect"])})
        except (TypeError, KeyError) as error:
            raise CorpusError(f"{assignment}: malformed corpus entry {entry.get('name', entry)!r}: {error}") from error
        if any(len(pair) != 2 for pair in bug.replacements) or not bug.expect:
            raise CorpusError(f"{assignment}: corpus entry {bug.name} needs (old, new) pairs and at least one expect word")
        found.append(bug)
    names = [bug.name for bug in found]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CorpusError(f"{assignment}: corpus entries named more than once: {', '.join(repeated)}")
    return found


def mutate(bug: Bug, text: str) -> str:
    """`text` with the bug's replacements applied; CorpusError unless each `old` occurs exactly once
    (the catalogs' rule, `autograder.mutants.mutate`)."""
    as_mutant = mutants.Mutant(bug.name, bug.file, bug.replacements, bug.bug, (bug.task,), bug.expect[0])
    try:
        return mutants.mutate(as_mutant, text)
    except mutants.MutantError as error:
        raise CorpusError(f"corpus entry of base {bug.base}: {error}") from None


def apply(assignment: str, bug: Bug, destination: Path) -> Path:
    """A copy of the bug's base in `destination`, with the bug applied; returns `destination`."""
    shutil.copytree(bases(assignment)[bug.base], destination, ignore=shutil.ignore_patterns("__pycache__"))
    target = destination / bug.file
    target.write_text(mutate(bug, target.read_text(encoding="utf-8")), encoding="utf-8")
    return destination


def quotes_sentence(rule: str, sentence: str) -> bool:
    """Whether `rule` (an entry's or a mutant's) quotes (part of) `sentence`: one of its quoted
    fragments (between quotes, split at ellipses), normalized, is in the sentence or holds it."""
    quoted = re.findall(r"'(.+?)'(?=[\s,.;)]|$)|\"(.+?)\"", rule)
    fragments = [normalized(part) for pair in quoted for text in pair if text for part in re.split(r"\.\.\.|…", text)]
    target = normalized(sentence)
    return any(len(f) >= MIN_QUOTE and (f in target or target in f) for f in fragments)


def not_rules(assignment: str) -> dict[str, str]:
    """Sentences of the stubs that read like rules but state none for the student's code (the store's
    own behaviour, say), each with why: not_rules.json of the corpus, {} without one."""
    path = folder(assignment) / "not_rules.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def normalized(text: str) -> str:
    """`text` compared as a rule: casefolded, without backticks, whitespace collapsed, ends trimmed."""
    return re.sub(r"\s+", " ", text.replace("`", "")).strip(" .;:").casefold()


def stated_rules(stub: Path) -> list[tuple[str, str]]:
    """(where, sentence) for every sentence of the stub file's docstrings that states a rule (holds
    one of RULE_WORDS); `where` names the module, class or function whose docstring it is in."""
    rules = []
    for node in ast.walk(ast.parse(stub.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node) or ""
            where = f"{stub.name}:{getattr(node, 'name', 'module')}"
            for sentence in re.split(r"(?<=[.;])\s+(?=[A-Z`(])", re.sub(r"\s+", " ", text)):
                if RULE_WORDS.search(sentence):
                    rules.append((where, sentence.strip()))
    return rules
