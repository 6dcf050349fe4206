"""Tree attention for speculative decoding: attention.serving.tree.

* The mask of a tree lets each node see itself and its ancestors, in any node order,
  and a chain's mask is the causal one; lists that are not trees are refused.
* One call over the cache and the whole tree, with that mask and each node at its
  depth's position, gives every node the output of its own branch run alone after the
  cache through the layer's own causal forward pass (float64, 1e-10), with RoPE, the
  layer's parts (QK-norms, gate, sinks, softcap, keys as values) and grouped heads.
* Greedy acceptance keeps the longest path that the target's argmax follows, and the
  bonus token; rolling a cache back to that path (a KVCache, or a paged sequence
  verified in a forked scratch) leaves what running the accepted tokens as a chain
  leaves (float64, 1e-10), and frees every rejected block.
* On a tiny ``transformers`` Llama built from a config (float64, its attention the
  package's through ``Decoder.from_transformers``), the :class:`Decoder` is the model (logits
  to float32's tolerance, since ``transformers`` computes RoPE's angles in float32;
  greedy tokens equal to ``generate``'s), and greedy speculative decoding gives
  exactly the target's greedy tokens, for a draft from a smaller config, a draft that
  shares the target's first layer, and the target as its own draft (which accepts
  every guess), over chains and trees. ``Decoder.from_transformers`` shares the model's
  embedding, MLPs and head, keeps its dtype and mode, serves Qwen3 too, and refuses
  what is not a supported ``transformers`` model.
"""

from __future__ import annotations

import pytest
import torch
from helpers import assert_tight, expect, make_gqa
from hf_models import FLOAT32_STEP
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, Qwen3Config

from attention import KVCache, PagedKVCache, causal_mask
from attention.serving import (
    Decoder,
    attention_at_positions,
    greedy_accept,
    greedy_decode,
    keep_accepted,
    keep_accepted_paged,
    speculative_decode,
    tree_attention_mask,
    tree_cache_mask,
    tree_positions,
)

pytestmark = pytest.mark.usefixtures("single_thread")
F64 = torch.float64


@st.composite
def trees(draw: st.DrawFn, *, max_nodes: int = 7, min_nodes: int = 1) -> list[int]:
    """A random tree of parents, its nodes shuffled so that a child may come first."""
    n = draw(st.integers(min_nodes, max_nodes))
    ordered = [draw(st.integers(-1, i - 1)) for i in range(n)]  # parent before child
    place = draw(st.permutations(range(n)))  # node i is stored at index place[i]
    parents = [0] * n
    for node, parent in enumerate(ordered):
        parents[place[node]] = -1 if parent == -1 else place[parent]
    return parents


def branch(parents: list[int], node: int) -> list[int]:
    """The nodes from the root down to ``node``, walking up by the parents."""
    path = [node]
    while parents[path[-1]] != -1:
        path.append(parents[path[-1]])
    return path[::-1]


@given(trees())
def test_each_node_sees_exactly_itself_and_its_ancestors(parents):
    mask = tree_attention_mask(parents)
    assert mask.dtype == torch.bool and mask.shape == (len(parents), len(parents))
    for node in range(len(parents)):
        seen = set(branch(parents, node))
        assert mask[node].nonzero().flatten().tolist() == sorted(seen)
    positions = tree_positions(parents, cache_length=3)
    assert positions.tolist() == [3 + len(branch(parents, i)) - 1 for i in range(len(parents))]
    full = tree_cache_mask(parents, 3)
    assert full[:, :3].all() and torch.equal(full[:, 3:], mask)


def test_a_chain_is_the_causal_mask_and_separate_roots_see_only_themselves():
    chain = [-1, 0, 1, 2, 3]
    assert torch.equal(tree_attention_mask(chain), causal_mask(5, 5))
    assert tree_positions(chain, 7).tolist() == [7, 8, 9, 10, 11]
    assert torch.equal(tree_attention_mask([-1, -1, -1]), torch.eye(3, dtype=torch.bool))
    assert tree_attention_mask([]).shape == (0, 0)
    assert tree_attention_mask(torch.tensor([-1, 0])).tolist() == [[True, False], [True, True]]


@pytest.mark.parametrize(
    ("parents", "message", "error"),
    [
        (
            [0],
            "tree_attention_mask: parents is not a tree: the nodes 0 -> 0 form a cycle",
            ValueError,
        ),
        (
            [-1, 2, 3, 1],
            "tree_attention_mask: parents is not a tree: the nodes 1 -> 2 -> 3 -> 1",
            ValueError,
        ),
        ([-1, 2], "tree_attention_mask: parents[1] = 2 is not a node: expected -1", ValueError),
        ([-2], "tree_attention_mask: parents[0] = -2 is not a node", ValueError),
        (
            [-1, 0.0],
            "tree_attention_mask: parents[1] must be an int (a node's index, or -1), got 0.0",
            TypeError,
        ),
        ([-1, True], "tree_attention_mask: parents[1] must be an int", TypeError),
        ("-1", "tree_attention_mask: parents must be a list of ints", TypeError),
        (
            3,
            "tree_attention_mask: parents must be a list of ints, each node's parent's index "
            "or -1, got int",
            TypeError,
        ),
        (
            torch.tensor([-1.0, 0.0]),
            "tree_attention_mask: parents must be a list of ints",
            TypeError,
        ),
    ],
)
def test_a_list_that_is_not_a_tree_is_refused(parents, message, error):
    with expect(message, error):
        tree_attention_mask(parents)


def test_a_negative_cache_length_is_refused():
    with expect(
        "tree_positions: cache_length must be an int >= 0 (the tokens already cached), got -1"
    ):
        tree_positions([-1], -1)
    with expect("tree_cache_mask: cache_length must be an int >= 0", TypeError):
        tree_cache_mask([-1], 1.5)


PARTS = st.sampled_from(
    [(), ("qk_norm",), ("W_gate",), ("no_W_value", "v_norm"), ("qk_norm_projection",)]
)


def tree_layer(data: st.DataObject, parts: tuple[str, ...], **kwargs):
    """A float64 layer with RoPE and grouped heads, drawn sizes, and a context of 16."""
    num_kv_heads = data.draw(st.integers(1, 2))
    layout = {
        "num_heads": num_kv_heads * data.draw(st.integers(1, 2)),
        "num_kv_heads": num_kv_heads,
        "head_dim": 2 * data.draw(st.integers(1, 3)),
        "context_length": 16,
        "qkv_bias": data.draw(st.booleans()),
        "seed": data.draw(st.integers(0, 2**16)),
    }
    return make_gqa(
        layout, parts=parts, rope_base=data.draw(st.sampled_from([10.0, 1e4])), **kwargs
    )


def prefix_cache(layer, prefix: torch.Tensor) -> KVCache:
    cache = KVCache()
    if prefix.shape[1]:
        layer(prefix, cache=cache)
    return cache


@given(parents=trees(), parts=PARTS, data=st.data())
def test_every_node_gets_what_its_branch_gets_run_alone_after_the_cache(parents, parts, data):
    extras = data.draw(st.sampled_from([{}, {"softcap": 2.0}, {"sinks": True}]))
    layer = tree_layer(data, parts, **extras)
    if layer.sinks is not None:  # the sinks start at zeros: make them count
        layer.sinks.data = torch.linspace(-1.0, 1.0, layer.num_heads, dtype=F64)
    batch, cached = data.draw(st.integers(1, 2)), data.draw(st.integers(0, 5))
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    prefix = torch.randn(batch, cached, layer.d_in, generator=generator, dtype=F64)
    nodes = torch.randn(batch, len(parents), layer.d_in, generator=generator, dtype=F64)
    cache = prefix_cache(layer, prefix)
    positions, allowed = tree_positions(parents, cached), tree_cache_mask(parents, cached)
    out = attention_at_positions(layer, nodes, positions, allowed, cache)
    assert cache.seen_tokens == cached + len(parents)
    for node in range(len(parents)):
        path = branch(parents, node)
        alone = layer(nodes[:, path], cache=prefix_cache(layer, prefix))  # causal, after the cache
        assert_tight(out[:, node], alone[:, -1])


@given(parts=PARTS, data=st.data())
def test_a_chain_after_a_cache_is_the_layers_own_forward_pass(parts, data):
    layer = tree_layer(data, parts)
    cached, n = data.draw(st.integers(0, 4)), data.draw(st.integers(1, 5))
    x = torch.randn(
        1, cached + n, layer.d_in, dtype=F64, generator=torch.Generator().manual_seed(n)
    )
    chain = list(range(-1, n - 1))
    ours, theirs = prefix_cache(layer, x[:, :cached]), prefix_cache(layer, x[:, :cached])
    out = attention_at_positions(
        layer, x[:, cached:], tree_positions(chain, cached), tree_cache_mask(chain, cached), ours
    )
    assert_tight(out, layer(x[:, cached:], cache=theirs))
    assert_tight(ours.keys, theirs.keys)
    assert_tight(ours.values, theirs.values)


def test_attention_at_positions_refuses_what_a_tree_cannot_use():
    layout = {
        "num_heads": 2,
        "num_kv_heads": 1,
        "head_dim": 2,
        "context_length": 8,
        "qkv_bias": False,
        "seed": 0,
    }
    layer = make_gqa(layout, rope_base=10.0)
    x = torch.zeros(1, 2, 4, dtype=F64)
    positions, allowed = tree_positions([-1, 0]), tree_attention_mask([-1, 0])
    with expect(
        "attention_at_positions: layer must be a GroupedQueryAttention, got Linear", TypeError
    ):
        attention_at_positions(torch.nn.Linear(4, 4), x, positions, allowed)
    windowed = make_gqa(layout, rope_base=10.0, window=2)
    with expect("attention_at_positions: expected a layer that attends to every earlier token"):
        attention_at_positions(windowed, x, positions, allowed)
    with expect(
        "attention_at_positions: positions must be an integer tensor of shape (n,), got list",
        TypeError,
    ):
        attention_at_positions(layer, x, [0, 1], allowed)
    with expect(
        "attention_at_positions: expected integer positions of shape (n,) = (2,), got shape (3,)"
    ):
        attention_at_positions(layer, x, torch.arange(3), allowed)
    with expect(
        "attention_at_positions: positions must lie in [0, context_length) = [0, 8), got 7 to 8"
    ):
        attention_at_positions(layer, x, torch.tensor([7, 8]), allowed)
    with expect(
        "attention_at_positions: expected a cache that keeps every token at its own position"
    ):
        attention_at_positions(layer, x, positions, allowed, KVCache(window=2))
    with expect(
        "attention_at_positions: cache must be a KeyValueCache or None, got dict", TypeError
    ):
        attention_at_positions(layer, x, positions, allowed, {})
    with expect("attention_at_positions: expected allowed broadcastable to"):
        attention_at_positions(layer, x, positions, tree_cache_mask([-1, 0], 1))


# -- verification and roll-back ------------------------------------------------------


def test_greedy_acceptance_follows_the_targets_argmax_down_the_tree():
    parents, draft = [-1, -1, 0, 1, 1, 4], [5, 7, 2, 3, 8, 6]
    logits = torch.zeros(7, 10, dtype=F64)
    logits[0, 7] = 1.0  # after the last token the target says 7: node 1
    logits[2, 8] = 1.0  # after node 1, 8: node 4 (node 3 holds 3)
    logits[5, 6] = 1.0  # after node 4, 6: node 5
    logits[6, 1] = 1.0  # after node 5 (a leaf), 1: the bonus
    accepted = greedy_accept(parents, draft, logits)
    assert (accepted.path, accepted.tokens, accepted.bonus) == ([1, 4, 5], [7, 8, 6, 1], 1)
    logits[0, 7], logits[0, 9] = 0.0, 2.0  # no root holds 9: only the bonus
    assert greedy_accept(parents, draft, logits).tokens == [9]
    assert greedy_accept([], [], logits[:1]).tokens == [9]  # no draft at all


def test_greedy_acceptance_refuses_what_does_not_fit_the_tree():
    logits = torch.zeros(3, 4)
    with expect("greedy_accept: expected logits of shape (n + 1, vocab_size) = (3, vocab_size)"):
        greedy_accept([-1, 0], [1, 2], logits[:2])
    with expect("greedy_accept: expected one draft token per node, 2, got 1"):
        greedy_accept([-1, 0], [1], logits)
    with expect("greedy_accept: draft_tokens[1] = 4 is not a token id: expected 0 to 3"):
        greedy_accept([-1, 0], [1, 4], logits)
    with expect("greedy_accept: parents is not a tree: the nodes 0 -> 1 -> 0"):
        greedy_accept([1, 0], [1, 2], logits)
    with expect("greedy_accept: logits must be a torch.Tensor, got list", TypeError):
        greedy_accept([-1, 0], [1, 2], [[0.0]])


def test_keep_accepted_refuses_rows_that_were_not_verified():
    cache = KVCache()
    cache.update(torch.zeros(1, 1, 5, 2), torch.zeros(1, 1, 5, 2))
    with expect("keep_accepted: kept[1] = 2 is not a verified row: expected 0 to 1"):
        keep_accepted(cache, 3, [0, 2])
    with expect("keep_accepted: expected each kept row once, got [1, 1]"):
        keep_accepted(cache, 3, [1, 1])
    with expect("keep_accepted: cache_length = 6 is more than the cache holds, 5"):
        keep_accepted(cache, 6, [])
    with expect("keep_accepted: expected a cache that keeps every token"):
        keep_accepted(KVCache(window=4), 0, [])
    with expect("keep_accepted: cache must be a KVCache, got PagedKVCache", TypeError):
        keep_accepted(PagedKVCache(1, 1, 1, 1), 0, [])
    assert cache.seen_tokens == 5  # nothing refused changed anything


def llama(seed: int, **sizes: int) -> AutoModelForCausalLM:
    """A tiny float64 Llama from a config, its weights drawn from ``seed``, in eval mode.

    ``initializer_range`` is large so that the random model's greedy tokens vary.
    """
    config = LlamaConfig(
        **{
            "vocab_size": 48,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 4,
            "max_position_embeddings": 64,
            "initializer_range": 0.3,
            **sizes,
        }
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(config).to(F64).eval()


TARGET_MODEL = llama(0)
TARGET = Decoder.from_transformers(TARGET_MODEL)
#: The draft: a smaller config (one layer, half the width), its own random weights.
SMALL_DRAFT = Decoder.from_transformers(
    llama(
        1,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
)
#: A draft that shares the target's first layer, embedding, norm and head: it guesses better.
FIRST_LAYER_DRAFT = Decoder(TARGET.embedding, [TARGET.blocks[0]], TARGET.norm, TARGET.head)


def test_the_decoder_is_the_transformers_model_and_greedy_decoding_is_generate():
    prompt = [3, 14, 15, 9, 2, 6]
    with torch.no_grad():
        theirs = TARGET_MODEL(torch.tensor([prompt])).logits[0]
        ours = TARGET.run_tree(prompt, list(range(-1, len(prompt) - 1)), TARGET.new_caches())
        generated = TARGET_MODEL.generate(
            torch.tensor([prompt]), max_new_tokens=12, do_sample=False
        )
    torch.testing.assert_close(ours, theirs, **FLOAT32_STEP)
    assert greedy_decode(TARGET, prompt, 12) == generated[0, len(prompt) :].tolist()


def test_from_transformers_shares_the_models_modules_in_its_dtype_and_serves_qwen3():
    assert TARGET.embedding is TARGET_MODEL.model.embed_tokens
    assert TARGET.head is TARGET_MODEL.lm_head
    assert TARGET.blocks[1].mlp is TARGET_MODEL.model.layers[1].mlp
    norm = TARGET.blocks[0].attention_norm
    assert norm.weight.dtype == F64 and not TARGET.training
    theirs = TARGET_MODEL.model.layers[0].input_layernorm
    assert torch.equal(norm.weight, theirs.weight) and norm.eps == theirs.variance_epsilon
    qwen3 = AutoModelForCausalLM.from_config(
        Qwen3Config(
            vocab_size=48,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=4,
        )
    ).to(F64)
    decoder = Decoder.from_transformers(qwen3)
    assert decoder.training  # the model's mode, here training (no dropout in either)
    prompt = [3, 14, 15, 9]
    with torch.no_grad():
        ours = decoder.run_tree(prompt, [-1, 0, 1, 2], decoder.new_caches())
        expected = qwen3(torch.tensor([prompt])).logits[0]
    torch.testing.assert_close(ours, expected, **FLOAT32_STEP)


def test_from_transformers_refuses_what_is_not_a_supported_model():
    with expect(
        "Decoder.from_transformers: model must be a transformers causal language model, got Linear",
        TypeError,
    ):
        Decoder.from_transformers(torch.nn.Linear(2, 2))
    gpt2 = AutoModelForCausalLM.from_config(
        GPT2Config(vocab_size=48, n_embd=16, n_layer=1, n_head=2, n_positions=32)
    )
    with expect("Decoder.from_transformers: model_type must be one of ('llama', 'qwen3'), "):
        Decoder.from_transformers(gpt2)


def verified(
    model: Decoder, committed: list[int], last: int, parents: list[int], tokens: list[int]
):
    """Caches holding ``committed``, then ``last`` and the tree verified; and the logits."""
    caches = model.new_caches()
    if committed:
        model.run_tree(committed, list(range(-1, len(committed) - 1)), caches)
    with_root = [-1] + [0 if p == -1 else p + 1 for p in parents]
    return caches, model.run_tree([last, *tokens], with_root, caches)


@given(parents=trees(max_nodes=6), data=st.data())
def test_a_cache_rolled_back_to_the_accepted_path_is_that_path_run_as_a_chain(parents, data):
    committed = data.draw(st.lists(st.integers(0, 47), max_size=4))
    last = data.draw(st.integers(0, 47))
    tokens = data.draw(st.lists(st.integers(0, 47), min_size=len(parents), max_size=len(parents)))
    with torch.no_grad():
        caches, logits = verified(TARGET, committed, last, parents, tokens)
        # Any path from a root down, as if the target had accepted it
        path = branch(parents, data.draw(st.integers(0, len(parents) - 1)))
        path = path[: data.draw(st.integers(0, len(path)))]
        for cache in caches:
            keep_accepted(cache, len(committed), [0] + [node + 1 for node in path])
        chain = [*committed, last, *(tokens[node] for node in path)]
        expected = TARGET.new_caches()
        TARGET.run_tree(chain, list(range(-1, len(chain) - 1)), expected)
    for ours, theirs in zip(caches, expected, strict=True):
        assert ours.seen_tokens == len(chain)
        assert_tight(ours.keys, theirs.keys)
        assert_tight(ours.values, theirs.values)
    # The verified logits of a node are those after its branch, run as a chain
    with torch.no_grad():
        alone = TARGET.run_tree(chain, list(range(-1, len(chain) - 1)), TARGET.new_caches())
    rows = [0] + [node + 1 for node in path]
    assert_tight(logits[rows], alone[len(committed) :])


@given(parents=trees(max_nodes=6), block_size=st.integers(1, 4), data=st.data())
def test_a_paged_sequence_keeps_the_accepted_rows_and_frees_the_rejected_blocks(
    parents, block_size, data
):
    """The tree goes into a scratch fork, the committed tokens' blocks untouched; what
    stays is what the contiguous cache keeps, and the pool ends with the blocks of the
    committed and accepted tokens only."""
    committed = data.draw(st.lists(st.integers(0, 47), max_size=5))
    tokens = data.draw(st.lists(st.integers(0, 47), min_size=len(parents), max_size=len(parents)))
    caches, _ = verified(TARGET, committed, 7, parents, tokens)
    keys, values = caches[0].keys[0].transpose(0, 1), caches[0].values[0].transpose(0, 1)
    pool = PagedKVCache(40, block_size, TARGET.blocks[0].attention.num_kv_heads, 4, dtype=F64)
    pool.add(0)
    pool.update(0, keys[: len(committed)], values[: len(committed)])
    before = pool.gather(0)[0].clone()
    pool.fork(0, 1)
    pool.update(1, keys[len(committed) :], values[len(committed) :])
    assert torch.equal(pool.gather(0)[0], before)  # copy-on-write: the tree wrote elsewhere
    path = branch(parents, data.draw(st.integers(0, len(parents) - 1)))
    rows = [0] + [node + 1 for node in path]
    keep_accepted_paged(pool, 0, 1, rows)
    keep_accepted(caches[0], len(committed), rows)
    assert pool.seq_ids == [0]
    assert torch.equal(pool.gather(0)[0], caches[0].keys[0].transpose(0, 1))
    assert torch.equal(pool.gather(0)[1], caches[0].values[0].transpose(0, 1))
    length = len(committed) + len(rows)
    assert pool.num_free_blocks == 40 - -(-length // block_size)  # no block leaked


def test_keep_accepted_paged_refuses_a_scratch_that_is_not_a_fork():
    pool = PagedKVCache(8, 2, 1, 1)
    for seq_id, n in ((0, 3), (1, 5)):
        pool.add(seq_id)
        pool.update(seq_id, torch.full((n, 1, 1), float(seq_id)), torch.zeros(n, 1, 1))
    with expect("keep_accepted_paged: expected scratch_id 1 to be a fork of seq_id 0"):
        keep_accepted_paged(pool, 0, 1, [0])
    with expect("PagedKVCache: unknown seq_id 5"):
        keep_accepted_paged(pool, 5, 1, [0])
    assert pool.seq_ids == [0, 1]


# -- speculative decoding ------------------------------------------------------------

DRAFTS = {"small config": SMALL_DRAFT, "target's first layer": FIRST_LAYER_DRAFT, "target": TARGET}


@pytest.mark.parametrize("draft", DRAFTS.values(), ids=DRAFTS.keys())
@given(
    prompt=st.lists(st.integers(0, 47), min_size=1, max_size=6),
    branching=st.sampled_from([(1,), (1, 1, 1), (2, 2), (3, 1, 2), (4,)]),
    count=st.integers(0, 10),
)
@settings(max_examples=15)
def test_greedy_speculative_decoding_gives_the_targets_own_greedy_tokens(
    draft, prompt, branching, count
):
    out = speculative_decode(TARGET, draft, prompt, count, branching=branching)
    assert out.tokens == greedy_decode(TARGET, prompt, count)
    assert all(1 <= a <= len(branching) + 1 for a in out.accepted_per_step)
    assert sum(out.accepted_per_step) - len(branching) <= count <= sum(out.accepted_per_step)
    if draft is TARGET:  # its own draft: every guess accepted
        assert out.accepted_per_step == [len(branching) + 1] * len(out.accepted_per_step)


def test_a_draft_that_shares_the_target_accepts_more_than_a_random_one():
    prompt, branching = [3, 14, 15, 9], (2, 2, 2)
    shared = speculative_decode(TARGET, FIRST_LAYER_DRAFT, prompt, 24, branching=branching)
    small = speculative_decode(TARGET, SMALL_DRAFT, prompt, 24, branching=branching)
    assert shared.tokens == small.tokens == greedy_decode(TARGET, prompt, 24)
    assert shared.mean_accepted > small.mean_accepted >= 1.0


def test_speculative_decoding_refuses_bad_input():
    with expect("speculative_decode: expected a prompt of at least one token, got none"):
        speculative_decode(TARGET, SMALL_DRAFT, [], 3)
    with expect(
        "speculative_decode: expected a Decoder as the draft, got LlamaForCausalLM", TypeError
    ):
        speculative_decode(TARGET, TARGET_MODEL, [1], 3)
    with expect("speculative_decode: branching[1] must be at least 1, got 0"):
        speculative_decode(TARGET, SMALL_DRAFT, [1], 3, branching=(2, 0))
    with expect(
        "speculative_decode: branching must be a non-empty list of ints, got ()", TypeError
    ):
        speculative_decode(TARGET, SMALL_DRAFT, [1], 3, branching=())
    with expect("speculative_decode: max_new_tokens must be an int >= 0, got -1"):
        speculative_decode(TARGET, SMALL_DRAFT, [1], -1)
    with expect("greedy_decode: prompt[0] must be an int (a token id)", TypeError):
        greedy_decode(TARGET, [1.5], 3)
