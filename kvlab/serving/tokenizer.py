"""The serving lab's tokenizer: a byte-level BPE (Hugging Face `tokenizers`) trained on text the
repository ships, plus a ChatML chat template like Qwen2.5's.

`load_tokenizer()` trains it from `data/corpus.txt` (English and Chinese) the first time it is
called in a process: no download, and the same vocabulary every time (the trainer is deterministic
on the same text and settings; a repository test checks that). Byte-level pre-tokenization means
every string, in any script, encodes; text the corpus never showed just takes more tokens.

Special tokens: `<|endoftext|>` (end of a completion), `<|im_start|>`, `<|im_end|>` (chat turns;
`<|im_end|>` ends an assistant answer).
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

CORPUS = Path(__file__).resolve().parent / "data" / "corpus.txt"
VOCAB_SIZE = 1024
END_OF_TEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [END_OF_TEXT, IM_START, IM_END]


class ChatTokenizer:
    """Encode/decode text and render chat messages (ChatML) into prompt token ids."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()
        self.eos_token_id = tokenizer.token_to_id(END_OF_TEXT)
        self.im_end_id = tokenizer.token_to_id(IM_END)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`, special tokens left out. Bytes that do not form whole characters yet decode
        as U+FFFD; streaming callers hold such a tail back (see `stream_text`)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def apply_chat_template(self, messages: Sequence[dict[str, str]]) -> str:
        """ChatML: each message as `<|im_start|>{role}\\n{content}<|im_end|>\\n`, then the assistant's turn.

        ValueError for a message without a str role and content.
        """
        parts = []
        for message in messages:
            role, content = message.get("role"), message.get("content")
            if not isinstance(role, str) or not isinstance(content, str):
                raise ValueError("each message needs a string 'role' and a string 'content'")
            parts.append(f"{IM_START}{role}\n{content}{IM_END}\n")
        return "".join(parts) + f"{IM_START}assistant\n"


def stream_text(tokenizer: ChatTokenizer, ids: Sequence[int], sent: str) -> str:
    """The text of `ids` beyond the `sent` prefix, holding back a trailing partial character."""
    text = tokenizer.decode(ids)
    if text.endswith("\ufffd"):
        text = text.rstrip("\ufffd")
    return text[len(sent):] if text.startswith(sent) else ""


def train(corpus: Path = CORPUS, vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """A byte-level BPE trained on `corpus` (its lines starting with # are comments)."""
    lines = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


@functools.lru_cache(maxsize=1)
def load_tokenizer() -> ChatTokenizer:
    """The course tokenizer (trained once per process)."""
    return ChatTokenizer(train())
