"""Words to ids without a trained tokenizer: hashed, so that any word (an unseen noun, an invented
word, French) gets an id, and agents trained from scratch need no vocabulary file."""

from __future__ import annotations

import re
import zlib

_WORD = re.compile(r"\w+|[^\w\s]")


def word_ids(text: str, buckets: int) -> list[int]:
    """The words and punctuation of ``text``, lower-cased, each hashed to ``1 .. buckets - 1``
    (0 is padding). The same word always gets the same id, in every process.

    >>> word_ids("Go to the red ball.", 8192) == word_ids("go to the RED ball .", 8192)
    True
    >>> len(word_ids("", 8192))
    0
    """
    return [zlib.crc32(word.encode()) % (buckets - 1) + 1 for word in _WORD.findall(text.lower())]
