"""The site's trained toy: one attention layer that recalls a fact, trained in seconds.

Some chapters need what only a *trained* model has: keys and values it computed, and a
task where losing a token shows. Chapter 16 asks where its attention goes, chapter 30
quantizes its cache and chapter 31 evicts from it. They all use this one model,
trained here with a fixed seed, so that a number on one page is the same model's as on
the other.

The task: a sequence of :data:`~attention.toy.RECALL_LENGTH` tokens, most of them
*fillers*, random noise. A few are *facts*, a key and a value written together ("the
key 5 holds the value 2"). The last token is a *question*, one of those keys, and the
model answers its value. Guessing is right one time in
:data:`~attention.toy.RECALL_VALUES`; the trained model answers almost always, which
it can only do by attending from the question to the right fact.

Each token is four parts, each with its own embedding: a key, a value, a filler and a
question, with one extra index per part meaning "none" (a filler has no key, a fact no
question). The model adds the four embeddings, runs one
:class:`~attention.GroupedQueryAttention` (two query heads sharing one key/value head,
with RoPE) and reads the answer off the question's output.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from attention import _checks
from attention.cache import KeyValueCache
from attention.gqa import GroupedQueryAttention
from attention.rope import Rotary

__all__ = [
    "RECALL_FILLERS",
    "RECALL_KEYS",
    "RECALL_LENGTH",
    "RECALL_VALUES",
    "RecallModel",
    "recall_batch",
    "train_recall_model",
]

#: Distinct keys a fact can have.
RECALL_KEYS = 8
#: Distinct values a fact can hold, so a guess is right one time in 8.
RECALL_VALUES = 8
#: Distinct filler tokens.
RECALL_FILLERS = 16
#: Tokens per training sequence, the question last; the model's context length.
RECALL_LENGTH = 32


def recall_batch(
    n: int,
    length: int = RECALL_LENGTH,
    facts: int = 3,
    fact_at: int | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of the recall task, and the value each one's question asks for.

    Parameters
    ----------
    n : int
        Number of sequences.
    length : int
        Tokens per sequence, the question last (at least 2).
    facts : int
        Facts per sequence, at distinct random places before the question, with
        distinct keys (1 to :data:`~attention.toy.RECALL_KEYS`, and fewer than ``length``). The
        question asks for the first of them.
    fact_at : int, optional
        If given, one fact only, at this position (``0 <= fact_at < length - 1``),
        so that its distance to the question is known; ``facts`` is then ignored.
    generator : torch.Generator, optional
        Where the random draws come from; the global generator if None.

    Returns
    -------
    tokens : torch.Tensor
        ``(n, length, 4)`` int64: each token's key, value, filler and question index.
        In the four parts, :data:`~attention.toy.RECALL_KEYS`,
        :data:`~attention.toy.RECALL_VALUES`, :data:`~attention.toy.RECALL_FILLERS` and
        :data:`~attention.toy.RECALL_KEYS` mean "none".
    answers : torch.Tensor
        ``(n,)`` int64: the value of the fact whose key the question names.

    Examples
    --------
    >>> import torch
    >>> tokens, answers = recall_batch(2, length=6, fact_at=1,
    ...                                generator=torch.Generator().manual_seed(0))
    >>> tokens.shape, answers.shape
    (torch.Size([2, 6, 4]), torch.Size([2]))
    >>> bool((tokens[:, 1, 0] == tokens[:, -1, 3]).all())  # the question names the fact
    True
    >>> bool((tokens[:, 1, 1] == answers).all())  # whose value is the answer
    True
    """
    owner = "recall_batch"
    n = _checks.positive_int(owner, "n", n)
    length = _checks.positive_int(owner, "length", length)
    if length < 2:
        raise ValueError(
            f"{owner}: length must be at least 2 (a fact and a question), got {length}"
        )
    if fact_at is None:
        facts = _checks.positive_int(owner, "facts", facts)
        if facts > min(RECALL_KEYS, length - 1):
            raise ValueError(
                f"{owner}: facts must be at most {min(RECALL_KEYS, length - 1)} (distinct keys, "
                f"before the question), got {facts}"
            )
    else:
        fact_at = _checks.whole_number(owner, fact_at, "fact_at must be an integer")
        if not 0 <= fact_at < length - 1:
            raise ValueError(
                f"{owner}: fact_at must be a position before the question, "
                f"0 to {length - 2}, got {fact_at}"
            )
        facts = 1
    tokens = torch.empty(n, length, 4, dtype=torch.long)
    tokens[..., 0], tokens[..., 1], tokens[..., 3] = RECALL_KEYS, RECALL_VALUES, RECALL_KEYS
    tokens[..., 2] = torch.randint(RECALL_FILLERS, (n, length), generator=generator)
    if fact_at is None:  # `facts` distinct random places before the question
        where = torch.rand(n, length - 1, generator=generator).argsort(-1)[:, :facts]
    else:
        where = torch.full((n, 1), fact_at)
    keys = torch.rand(n, RECALL_KEYS, generator=generator).argsort(-1)[:, :facts]  # distinct keys
    values = torch.randint(RECALL_VALUES, (n, facts), generator=generator)
    rows = torch.arange(n)[:, None]
    tokens[rows, where, 0], tokens[rows, where, 1] = keys, values
    tokens[rows, where, 2] = RECALL_FILLERS  # a fact is no filler
    tokens[:, -1, 2], tokens[:, -1, 3] = RECALL_FILLERS, keys[:, 0]  # the question
    return tokens, values[:, 0]


class RecallModel(nn.Module):
    """Four embeddings, one attention layer with RoPE, and a linear readout.

    Parameters
    ----------
    d : int
        Width of the embeddings and of the attention layer, even: two query heads of
        ``d // 2`` dimensions share one key/value head.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> model = RecallModel()
    >>> tokens, answers = recall_batch(3)
    >>> model(tokens).shape  # (n, tokens, RECALL_VALUES): a guess at every position
    torch.Size([3, 32, 8])
    >>> model.embed(tokens).shape  # what the attention layer reads
    torch.Size([3, 32, 32])
    """

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        d = _checks.positive_int(type(self).__name__, "d", d)
        if d % 2:
            raise ValueError(f"RecallModel: d must be even (two heads of d // 2), got {d}")
        self.key = nn.Embedding(RECALL_KEYS + 1, d)  # the last row: no key
        self.query = nn.Embedding(RECALL_KEYS + 1, d)
        self.value = nn.Embedding(RECALL_VALUES + 1, d)
        self.filler = nn.Embedding(RECALL_FILLERS + 1, d)
        self.attn = GroupedQueryAttention(
            d,
            d,
            RECALL_LENGTH,
            num_heads=2,
            num_kv_heads=1,
            rotary=Rotary(d // 2, 10000.0),
            out_bias=False,
        )
        self.out = nn.Linear(d, RECALL_VALUES)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(n, T, 4)`` token parts -> ``(n, T, d)``, the sum of their embeddings."""
        tokens = _checks.tensor(type(self).__name__, "tokens", tokens)
        if tokens.dim() != 3 or tokens.shape[-1] != 4:
            raise ValueError(
                f"RecallModel: tokens must have shape (n, T, 4), got {tuple(tokens.shape)}"
            )
        k, v, f, q = tokens.unbind(-1)
        return self.key(k) + self.value(v) + self.filler(f) + self.query(q)

    def forward(self, tokens: torch.Tensor, cache: KeyValueCache | None = None) -> torch.Tensor:
        """``(n, T, 4)`` -> ``(n, T, RECALL_VALUES)`` logits; the question's are the answer."""
        return self.out(self.attn(self.embed(tokens), cache=cache))


def train_recall_model(steps: int = 150, seed: int = 0) -> RecallModel:
    """The site's trained toy: a :class:`RecallModel` after ``steps`` steps of Adam.

    Training runs in float64 from ``torch.manual_seed(seed)``, 64 fresh sequences a
    step, learning rate 0.01, so that what CPUs and thread counts change in the
    rounding of sums stays far below the digits a page prints, on one thread. The
    model comes back in float32, in eval mode, as a real cache would hold it. The
    global random generator and the thread count are left as they were.

    Examples
    --------
    >>> import torch
    >>> model = train_recall_model()  # about a second on a CPU
    >>> tokens, answers = recall_batch(500, generator=torch.Generator().manual_seed(1))
    >>> with torch.no_grad():
    ...     right = (model(tokens)[:, -1].argmax(-1) == answers).float().mean()
    >>> bool(right > 0.95)  # a guess: 1 in 8
    True
    """
    steps = _checks.positive_int("train_recall_model", "steps", steps)
    seed = _checks.whole_number("train_recall_model", seed, "seed must be an integer")
    # One thread: a model this small spends more time handing work between threads
    # than doing it (on a busy two-core machine, 40 times more), and one thread sums
    # in the same order on every machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad():
            torch.manual_seed(seed)
            model = RecallModel().double()  # float64: rounding differences stay tiny
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
            for _ in range(steps):
                tokens, answers = recall_batch(64)
                loss = F.cross_entropy(model(tokens)[:, -1], answers)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return model.float().eval()
