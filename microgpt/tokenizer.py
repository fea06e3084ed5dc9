"""Characters to token ids and back, with one extra BOS token, as in microgpt."""

from collections.abc import Iterable

__all__ = ["CharTokenizer"]


class CharTokenizer:
    """The vocabulary is the sorted set of characters in the documents, plus BOS (the last id)."""

    def __init__(self, docs: Iterable[str]) -> None:
        self.chars = sorted(set("".join(docs)))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.bos = len(self.chars)

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + 1

    def encode(self, doc: str) -> list[int]:
        """`[BOS] + ids + [BOS]`: the model learns where a document starts and ends."""
        try:
            return [self.bos, *(self.stoi[ch] for ch in doc), self.bos]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids`, without BOS tokens."""
        return "".join(self.chars[i] for i in ids if i != self.bos)
