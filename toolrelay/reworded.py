"""A model's rewording of the prompt toolrelay wrote, recognised in its answer.

A weak model does not only repeat its prompt word for word (:mod:`toolrelay.echo`):
it rewords it ("To call multiple tools, write a single block, with only the JSON
object inside it."). :class:`RewordFilter` takes the texts toolrelay injected into
one round, splits them into sentences, and drops every sentence of the answer
whose words are that prompt's words again:

- its content words (lower case, a plural ``s`` taken off, a few quantifiers
  made one: *multiple* is *several*, *single* is *one*; function words left out)
  number at least :data:`MIN_WORDS`;
- at most :data:`MAX_FOREIGN` of them are words the prompt never uses;
- at least half of them, and at least :data:`MIN_SHARED`, appear in order in one
  sentence of the prompt (a longest common subsequence).

A short ordinary sentence ("Paris is the capital.") has too few words to be taken,
and prose about anything else has too many words the prompt never uses. The tool
sections of the listing (the client's own descriptions and schemas) are not
toolrelay's words: a model may say them again in its answer.

:class:`Rewordings` runs two such filters one after the other: whole lines
against the prompt's lines and sentences first (a line that rewords several
sentences at once), then the sentences left against the prompt's sentences (a
rewording inside a line of the model's own). Of a line taken as a whole, the
sentences with none of the prompt's words stay ("Sure." before a rewording).

What gets through: a rewording of fewer than :data:`MIN_WORDS` content words
(too short to tell from the model's own prose), and what goes: a word of the
model's own inside the rewording's sentence ("Sure, to call…").

In a stream, a sentence is held only while it could still become such a rewording
(an upper bound on what more words can add); once it cannot, what was held goes
out at once and the rest of the sentence passes. The bound ends the hold after a
second word the prompt never uses, or after about twice the longest prompt
sentence, whichever comes first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from toolrelay.parse import parse_tool_calls

MIN_WORDS = 5
MIN_SHARED = 4
MAX_FOREIGN = 1

_WORD = re.compile(r"[\w']+")
# A sentence ends at a newline, or at a stop followed by white space.
_SENTENCE_END = re.compile(r"\n|[.!?:;]\s")
_LINE_END = re.compile(r"\n")
_SPLIT = re.compile(r"(?<=[.!?:;])\s+")
_STOPS = ".!?:;"
# Function words: they carry no content, and a rewording changes them freely.
_FUNCTION_WORDS = frozenset([
    "a", "an", "the", "to", "of", "in", "on", "at", "by", "for", "with", "and", "or", "but",
    "if", "is", "are", "was", "be", "been", "being", "it", "its", "this", "that", "these",
    "those", "there", "here", "your", "you", "i", "we", "my", "our", "me", "us", "as", "so",
    "do", "does", "did", "not", "no", "only", "than", "then", "into", "from", "any", "some",
    "all", "just", "also", "can", "could", "will", "would", "should", "must", "may", "might",
    "what", "which", "who", "how", "when", "where", "why", "very", "more", "most", "other",
    "such", "own", "same", "about", "per", "like", "via", "each", "every", "instead", "now",
    "yet",
])  # fmt: skip
_SAME = {"multiple": "several", "many": "several", "single": "one"}


def content_words(text: str) -> list[str]:
    """The words of ``text`` that a rewording keeps, made comparable."""
    words = (_canonical(word) for word in _WORD.findall(text))
    return [word for word in words if word]


@lru_cache(maxsize=8192)
def _canonical(word: str) -> str:
    # Cached: the same words come again and again, and this runs on every word held.
    word = word.lower().strip("'")
    if not word or "'" in word or word in _FUNCTION_WORDS:
        return ""
    word = _SAME.get(word, word)
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def own_sentences(injected: Iterable[str], *, lines: bool = False) -> list[list[str]]:
    """The content words of each sentence toolrelay wrote, as the parser leaves
    them (call blocks out), without the listing's tool sections; with each whole
    line too when ``lines``."""
    sentences = []
    for text in injected:
        ours = parse_tool_calls(text).content
        # The listing ends with one `### name` section per tool: the client's words.
        section = re.search(r"^### ", ours, re.MULTILINE)
        if section is not None:
            ours = ours[: section.start()]
        for line in ours.splitlines():
            if lines:
                sentences.append(content_words(line))
            sentences.extend(content_words(part) for part in _SPLIT.split(line))
    return [words for words in sentences if words]


@dataclass(frozen=True, slots=True)
class _Prompt:
    """One round's prompt as a filter compares with it."""

    sentences: tuple[tuple[str, ...], ...]  # those long enough to share MIN_SHARED words
    vocabulary: frozenset[str]
    # For each word, the sentences holding it and where, as a bit mask of positions:
    # a word no sentence holds changes no subsequence.
    holding: dict[str, tuple[tuple[int, int], ...]]
    longest: int  # the longest sentence's length (0: none)


@lru_cache(maxsize=64)
def _prompt(injected: tuple[str, ...], by_line: bool) -> _Prompt:
    # Cached: the rounds of one client send the same prompt texts again and again.
    found = own_sentences(injected, lines=by_line)
    sentences = tuple(
        words for words in dict.fromkeys(map(tuple, found)) if len(words) >= MIN_SHARED
    )
    holding: dict[str, list[tuple[int, int]]] = {}
    for index, words in enumerate(sentences):
        masks: dict[str, int] = {}
        for position, word in enumerate(words):
            masks[word] = masks.get(word, 0) | 1 << position
        for word, mask in masks.items():
            holding.setdefault(word, []).append((index, mask))
    return _Prompt(
        sentences,
        frozenset(word for words in found for word in words),
        {word: tuple(masks) for word, masks in holding.items()},
        max(map(len, sentences), default=0),
    )


def subsequence_step(state: int, matches: int, size: int) -> int:
    """One more word of a text against a sentence of ``size`` words, for the
    length of their longest common subsequence, bit-parallel (Allison and Dix;
    Hyyrö): ``state`` starts as ``size`` one bits, ``matches`` has a bit at each
    position of the sentence that holds the word, and the length is the number of
    zero bits (:func:`shared_words`). The same as a row of the textbook table, in
    a few integer operations instead of a loop over the sentence."""
    kept = state & matches
    return ((state + kept) | (state - kept)) & ((1 << size) - 1)


def shared_words(state: int, size: int) -> int:
    """The length of the longest common subsequence a :func:`subsequence_step` state holds."""
    return size - state.bit_count()


def could_become(shared: int, size: int, words: int) -> bool:
    """Whether a sentence of ``words`` content words, ``shared`` of them in order
    with a prompt sentence of ``size`` words, could still become a rewording of it
    with more words (each more word shared, at best). Rises with ``shared`` and
    with ``size``."""
    # x more words: min(shared + x, size) shared of words + x. That rises until the
    # sentence is used up, then falls: take the best x allowed.
    x = max(size - shared, MIN_WORDS - words, MIN_SHARED - shared, 0)
    return 2 * min(shared + x, size) >= words + x


class RewordFilter:
    """Feed the content of one answer; what comes back is it without the
    sentences that reword toolrelay's prompt (``by_line``: without the lines
    that reword a line or a sentence of it)."""

    __slots__ = (
        "_end",
        "_foreign",
        "_held",
        "_line_start",
        "_prompt",
        "_rows",
        "_stop",
        "_tail",
        "_undecided",
        "_words",
    )

    def __init__(self, injected: Iterable[str], *, by_line: bool = False) -> None:
        self._end = _LINE_END if by_line else _SENTENCE_END
        self._prompt = _prompt(tuple(injected), by_line)
        self._held: list[str] = []
        self._tail = ""  # a word not ended yet
        self._stop = False  # the last character was a stop: white space next ends the sentence
        self._line_start = True
        self._words = 0
        self._foreign = 0
        # The longest common subsequence with each sentence (a subsequence_step
        # state), by index, once it has a word.
        self._rows: dict[int, int] = {}
        self._undecided = False
        self._reset()

    def __bool__(self) -> bool:
        return bool(self._prompt.sentences)

    def feed(self, text: str) -> str:
        out: list[str] = []
        at = 0
        while at < len(text):
            if self._stop and text[at].isspace():
                end, ends = at + 1, True
            else:
                found = self._end.search(text, at)
                end, ends = (found.end(), True) if found else (len(text), False)
            piece = text[at:end]
            self._stop = not ends and piece[-1] in _STOPS and self._end is _SENTENCE_END
            self._take(piece, out)
            if ends:
                self._end_sentence(out, newline=piece.endswith("\n"))
            at = end
        return "".join(out)

    def close(self) -> str:
        out: list[str] = []
        self._end_sentence(out, newline=False)
        self._stop, self._line_start = False, True
        return "".join(out)

    def _take(self, piece: str, out: list[str]) -> None:
        if not self._undecided:
            out.append(piece)
            return
        self._held.append(piece)
        tokens = _WORD.findall(self._tail + piece)
        self._tail = ""
        if tokens and _WORD.fullmatch(piece[-1]):
            self._tail = tokens.pop()  # the word goes on in the next piece
        for token in tokens:
            if self._add(token) and not self._possible():
                out.extend(self._held)
                self._held.clear()
                self._undecided = False
                return

    def _add(self, token: str) -> bool:
        """Count one word; whether it was a content word."""
        word = _canonical(token)
        if not word:
            return False
        self._words += 1
        if word not in self._prompt.vocabulary:
            self._foreign += 1
        # The longest common subsequences with the sentences holding it, one word on.
        rows, sentences = self._rows, self._prompt.sentences
        for index, matches in self._prompt.holding.get(word, ()):
            size = len(sentences[index])
            state = rows.get(index)
            rows[index] = subsequence_step(
                (1 << size) - 1 if state is None else state, matches, size
            )
        return True

    def _possible(self) -> bool:
        """Whether more words could still make the sentence a rewording."""
        if self._foreign > MAX_FOREIGN:
            return False
        k = self._words
        # A sentence none of the words is in shares nothing; the longest such is the
        # likeliest, and the longest of all is at least as likely (could_become rises
        # with the size and with what is shared).
        if self._prompt.longest and could_become(0, self._prompt.longest, k):
            return True
        return any(could_become(shared, size, k) for shared, size in self._shared_sizes())

    def _shared_sizes(self) -> Iterator[tuple[int, int]]:
        sentences = self._prompt.sentences
        for index, state in self._rows.items():
            size = len(sentences[index])
            yield shared_words(state, size), size

    def _reworded(self) -> bool:
        if self._tail:
            self._add(self._tail)
            self._tail = ""
        if self._words < MIN_WORDS or self._foreign > MAX_FOREIGN:
            return False
        return any(
            shared >= MIN_SHARED and 2 * shared >= self._words for shared, _ in self._shared_sizes()
        )

    def _end_sentence(self, out: list[str], *, newline: bool) -> None:
        if self._undecided:
            if not self._reworded():
                out.extend(self._held)
            elif kept := self._own_words():
                out.append(kept + "\n" if newline else kept)
            elif newline and not self._line_start:
                out.append("\n")  # the line goes on: what came before it ends here
        self._line_start = newline
        self._reset()

    def _own_words(self) -> str:
        """The sentences of a reworded line that hold none of the prompt's words
        ("Sure." before a rewording): the one word the prompt never uses that a
        rewording may carry is the model's own, and it stays when it is a sentence
        of its own."""
        vocabulary = self._prompt.vocabulary
        kept = [
            sentence
            for sentence in _SPLIT.split("".join(self._held).strip())
            if _WORD.search(sentence)
            and not any(word in vocabulary for word in content_words(sentence))
        ]
        return " ".join(kept)

    def _reset(self) -> None:
        self._held.clear()
        self._tail = ""
        self._words = 0
        self._foreign = 0
        self._rows = {}
        self._undecided = bool(self._prompt.sentences)


class Rewordings:
    """Both filters, one after the other: whole lines first (a line of several
    sentences reworded together), then the sentences left."""

    __slots__ = ("_lines", "_sentences")

    def __init__(self, injected: Iterable[str]) -> None:
        injected = tuple(injected)
        self._lines = RewordFilter(injected, by_line=True)
        self._sentences = RewordFilter(injected)

    def __bool__(self) -> bool:
        return bool(self._lines)

    def feed(self, text: str) -> str:
        return self._sentences.feed(self._lines.feed(text))

    def close(self) -> str:
        return self._sentences.feed(self._lines.close()) + self._sentences.close()


def remove_rewordings(text: str, injected: Iterable[str]) -> str:
    """``text`` without the lines and sentences that reword the ``injected`` texts."""
    reworded = Rewordings(injected)
    if not reworded:
        return text
    return reworded.feed(text) + reworded.close()
