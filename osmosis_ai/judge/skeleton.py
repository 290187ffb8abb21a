"""Text folded to what a reader sees, for spotting delimiters written with look-alike characters.

A model reads ``＜＜＜ＥＮＤ_…＞＞＞`` (fullwidth), ``<<<EN\u200bD_…>>>`` (a zero-width space inside) or
``<<<ЕND_…>>>`` (a Cyrillic ``Е``) as the sentinel it resembles, so matching must happen on a
*skeleton*: each character NFKC-normalised, invisible format characters and combining marks
dropped, and the Cyrillic and Greek letters that look like Latin ones replaced by those. The
skeleton keeps, for each of its characters, the index of the character it came from, so a match
found in the skeleton can be replaced in the original text.

Pure ASCII text is its own skeleton (the common case costs one ``isascii`` check); otherwise the
work is one pass over the non-ASCII characters, with each distinct character folded once.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import NamedTuple

# Cyrillic and Greek capitals and small letters that render like Latin ones, plus angle-bracket and
# backtick look-alikes that NFKC leaves alone.
_CONFUSABLES = str.maketrans(
    {
        **dict(zip("АВЕЅІЈКМНОРСТХУԁеіјорсхуѕһԛԝ", "ABESIJKMHOPCTXYdeijopcxyshqw", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοικνρτυχ", "ABEZHIKMNOPTYXoikvptux", strict=True)),
        **dict.fromkeys("‹❮˂ᐸ〈⟨〈", "<"),
        **dict.fromkeys("›❯˃ᐳ〉⟩〉", ">"),
        **dict.fromkeys("ˋ‵ˊ´", "`"),
    }
)
_DROPPED_CATEGORIES = frozenset({"Cf", "Mn", "Me"})
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


class Skeleton(NamedTuple):
    """``text`` folded for matching; ``origin[i]`` is the index in the original of ``text[i]``."""

    text: str
    origin: list[int] | None  # None: the skeleton is the original (pure ASCII)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original ``[start, end)`` covering skeleton characters ``start`` to ``end - 1``."""
        if self.origin is None:
            return start, end
        return self.origin[start], self.origin[end - 1] + 1


@functools.lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    if unicodedata.category(char) in _DROPPED_CATEGORIES:
        return ""
    folded = unicodedata.normalize("NFKC", char)
    return "".join(
        c for c in folded.translate(_CONFUSABLES) if unicodedata.category(c) not in _DROPPED_CATEGORIES
    )


def skeleton(text: str) -> Skeleton:
    """The matching skeleton of ``text`` with its map back to the original indices."""
    if text.isascii():
        return Skeleton(text, None)
    parts: list[str] = []
    origin: list[int] = []
    position = 0
    for match in _NON_ASCII.finditer(text):
        parts.append(text[position : match.start()])
        origin.extend(range(position, match.start()))
        for index in range(match.start(), match.end()):
            folded = _fold_char(text[index])
            parts.append(folded)
            origin.extend([index] * len(folded))
        position = match.end()
    parts.append(text[position:])
    origin.extend(range(position, len(text)))
    return Skeleton("".join(parts), origin)


def fold(text: str) -> str:
    """Just the skeleton text of ``text`` (for comparing, not for replacing)."""
    return skeleton(text).text
