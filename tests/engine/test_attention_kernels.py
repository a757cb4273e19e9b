"""Paged attention: the torch oracle against naive attention, the Triton kernels against the oracle.

The naive reference keeps every sequence's K/V contiguous and does an explicit fp64
softmax, so it shares no code (no block tables, no SDPA) with what it checks. Batches
mix decodes and prefills with and without a cached prefix, use shuffled block ids,
partial last blocks and GQA, and leave garbage in the cache slots nobody owns.

The Triton kernels run on CPU under `TRITON_INTERPRET=1`, which Triton reads when
the kernels are decorated, so before `attention_triton` is first imported. Another
test module may import it earlier in this process, so `test_triton_kernels_interpreted`
reruns this file's `TestTritonInterpreted` in a fresh pytest process with the
variable set (running this file with TRITON_INTERPRET=1 runs them directly).
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import warnings
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.engine.kernels import attention_torch, attention_triton
from structgen.engine.kernels.attention_torch import AttentionMetadata
from tests.engine.interpreted import assert_passes_interpreted

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
HAS_TRITON = importlib.util.find_spec("triton") is not None
# The Triton tests run compiled on a GPU, and interpreted on CPU where there is none.
KERNEL_DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETED else "cpu"

# ---------------------------------------------------------------------------------
# Batches and the naive reference


@dataclass
class Batch:
    query: torch.Tensor  # [T, heads, head_dim]
    new_keys: torch.Tensor  # [T, kv_heads, head_dim], not yet in the cache
    new_values: torch.Tensor
    k_cache: torch.Tensor  # cached prefixes stored, everything else garbage
    v_cache: torch.Tensor
    meta: AttentionMetadata
    context_keys: list[torch.Tensor]  # per sequence [seq_len, kv_heads, head_dim], contiguous
    context_values: list[torch.Tensor]

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.query.shape[-1])


def make_batch(
    *,
    heads: int,
    kv_heads: int,
    head_dim: int,
    block_size: int,
    decode_lens: list[int],
    prefills: list[tuple[int, int]],  # (cached prefix length, new tokens)
    dtype: torch.dtype = torch.float32,
    garbage: float = 1e4,  # value left in unowned cache slots (nan allowed)
    seed: int = 0,
    device: str = "cpu",
) -> Batch:
    gen = torch.Generator().manual_seed(seed)
    shapes = [(length, 1) for length in decode_lens] + [(p + q, q) for p, q in prefills]
    blocks_per_seq = [-(-seq_len // block_size) for seq_len, _ in shapes]
    num_blocks = sum(blocks_per_seq) + 3
    block_ids = torch.randperm(num_blocks, generator=gen).tolist()
    block_tables = torch.zeros(len(shapes), max(blocks_per_seq) + 1, dtype=torch.int32)

    cache_shape = (num_blocks, block_size, kv_heads, head_dim)
    k_cache = torch.full(cache_shape, garbage, dtype=dtype)
    v_cache = torch.full(cache_shape, -garbage, dtype=dtype)
    context_keys, context_values, new_keys, new_values, slots = [], [], [], [], []
    for b, ((seq_len, query_len), num_seq_blocks) in enumerate(zip(shapes, blocks_per_seq)):
        table = block_ids[:num_seq_blocks]
        del block_ids[:num_seq_blocks]
        block_tables[b, :num_seq_blocks] = torch.tensor(table, dtype=torch.int32)
        seq_slots = [table[p // block_size] * block_size + p % block_size for p in range(seq_len)]
        keys = torch.randn(seq_len, kv_heads, head_dim, generator=gen).to(dtype)
        values = torch.randn(seq_len, kv_heads, head_dim, generator=gen).to(dtype)
        prefix = seq_len - query_len
        k_cache.view(-1, kv_heads, head_dim)[seq_slots[:prefix]] = keys[:prefix]
        v_cache.view(-1, kv_heads, head_dim)[seq_slots[:prefix]] = values[:prefix]
        context_keys.append(keys)
        context_values.append(values)
        new_keys.append(keys[prefix:])
        new_values.append(values[prefix:])
        slots += seq_slots[prefix:]

    query_lens = [q for _, q in shapes]
    seq_lens = [s for s, _ in shapes]
    query_start_loc = torch.tensor([0] + query_lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    meta = AttentionMetadata(
        query_start_loc=query_start_loc,
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        block_tables=block_tables,
        slot_mapping=torch.tensor(slots, dtype=torch.int64),
        num_decodes=len(decode_lens),
        max_query_len=max(query_lens),
        max_seq_len=max(seq_lens),
        query_lens_cpu=query_lens,
        seq_lens_cpu=seq_lens,
    )
    query = torch.randn(sum(query_lens), heads, head_dim, generator=gen).to(dtype)
    if device != "cpu":
        for name in ("query_start_loc", "seq_lens", "block_tables", "slot_mapping"):
            setattr(meta, name, getattr(meta, name).to(device))
    return Batch(query.to(device), torch.cat(new_keys).to(device), torch.cat(new_values).to(device),
                 k_cache.to(device), v_cache.to(device), meta, context_keys, context_values)


def naive_attention(batch: Batch) -> torch.Tensor:
    """Per sequence, per head: explicit causal softmax(q k^T * scale) v in fp64."""
    heads = batch.query.shape[1]
    outputs = []
    starts = batch.meta.query_start_loc.tolist()
    for b, (keys, values) in enumerate(zip(batch.context_keys, batch.context_values)):
        query = batch.query[starts[b]:starts[b + 1]].double().cpu()
        seq_len, kv_heads = keys.shape[0], keys.shape[1]
        kv_head_of = torch.arange(heads) // (heads // kv_heads)
        keys = keys.double()[:, kv_head_of]  # [seq_len, heads, head_dim]
        values = values.double()[:, kv_head_of]
        scores = torch.einsum("ihd,jhd->hij", query, keys) * batch.scale
        positions = torch.arange(query.shape[0]) + seq_len - query.shape[0]
        visible = torch.arange(seq_len)[None, :] <= positions[:, None]
        scores = scores.masked_fill(~visible, float("-inf"))
        weights = torch.exp(scores - scores.amax(-1, keepdim=True))
        weights = weights / weights.sum(-1, keepdim=True)
        outputs.append(torch.einsum("hij,jhd->ihd", weights, values))
    return torch.cat(outputs)


def run_attention(backend, batch: Batch) -> torch.Tensor:
    """Write the new tokens' K/V with `backend`, then attend with it."""
    backend.write_kv_cache(batch.new_keys, batch.new_values, batch.k_cache, batch.v_cache,
                           batch.meta.slot_mapping)
    return backend.paged_attention(batch.query, batch.k_cache, batch.v_cache, batch.meta, batch.scale)


def max_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return (actual.double().cpu() - expected.double().cpu()).abs().max().item()


SMOLLM2 = {"heads": 9, "kv_heads": 3, "head_dim": 64}
MHA = {"heads": 8, "kv_heads": 8, "head_dim": 128}
MIXED = {"decode_lens": [1, 16, 17, 70], "prefills": [(0, 21), (5, 11), (32, 7), (13, 1)]}

# ---------------------------------------------------------------------------------
# The torch oracle against naive attention

ORACLE_CASES = {
    "smollm2-mixed": dict(**SMOLLM2, block_size=16, **MIXED),
    "mha-mixed": dict(**MHA, block_size=16, **MIXED),
    "decodes-only": dict(**SMOLLM2, block_size=16, decode_lens=[3, 33, 64, 100], prefills=[]),
    "prefills-only": dict(**SMOLLM2, block_size=16, decode_lens=[], prefills=[(0, 40), (16, 16), (3, 2)]),
    "block-size-8": dict(heads=4, kv_heads=1, head_dim=32, block_size=8, **MIXED),
    "block-size-32": dict(heads=4, kv_heads=2, head_dim=16, block_size=32, **MIXED),
}


@pytest.mark.parametrize("in_c", [True, False], ids=["c-rows", "torch"])
@pytest.mark.parametrize("case", ORACLE_CASES)
def test_oracle_matches_naive(case, in_c, monkeypatch):
    """float32 on CPU runs in C where the kernels are built; the torch path (other dtypes
    and devices) is held to the same reference with them left out."""
    if not in_c:
        monkeypatch.setattr(attention_torch, "cpu_kernels", None)
    batch = make_batch(**ORACLE_CASES[case])
    assert attention_torch.rows_in_c(batch.query, batch.k_cache, batch.v_cache, batch.meta) == (
        in_c and attention_torch.cpu_kernels is not None)
    assert max_error(run_attention(attention_torch, batch), naive_attention(batch)) < 1e-5


@pytest.mark.parametrize("dtype, tolerance", [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)])
def test_oracle_half_precision(dtype, tolerance):
    batch = make_batch(**SMOLLM2, block_size=16, **MIXED, dtype=dtype)
    out = run_attention(attention_torch, batch)
    assert out.dtype == dtype
    assert max_error(out, naive_attention(batch)) < tolerance


@settings(max_examples=25, deadline=None)
@given(
    kv_heads=st.sampled_from([1, 2, 3]),
    group=st.sampled_from([1, 3, 4]),
    block_size=st.sampled_from([1, 4, 16]),
    decode_lens=st.lists(st.integers(1, 50), max_size=4),
    prefills=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 20)), max_size=3),
    seed=st.integers(0, 2**16),
)
def test_oracle_matches_naive_random_batches(kv_heads, group, block_size, decode_lens, prefills, seed):
    if not decode_lens and not prefills:
        decode_lens = [1]
    batch = make_batch(heads=kv_heads * group, kv_heads=kv_heads, head_dim=16, block_size=block_size,
                       decode_lens=decode_lens, prefills=prefills, seed=seed)
    assert max_error(run_attention(attention_torch, batch), naive_attention(batch)) < 1e-5


def test_oracle_write_kv_cache_stores_strided_rows_at_slots():
    """Keys and values sliced from a fused qkv row, as the model passes them (on CPU in
    float32 this is the C store)."""
    batch = make_batch(**SMOLLM2, block_size=16, **MIXED)
    tokens, kv_heads, dim = batch.new_keys.shape
    fused = torch.cat([batch.new_keys.reshape(tokens, -1), batch.new_values.reshape(tokens, -1)], dim=1)
    keys, values = fused[:, : kv_heads * dim].view(tokens, kv_heads, dim), fused[:, kv_heads * dim :].view(
        tokens, kv_heads, dim)
    assert attention_torch.cache_rows_in_c(keys, batch.k_cache, batch.meta.slot_mapping)
    attention_torch.write_kv_cache(keys, values, batch.k_cache, batch.v_cache, batch.meta.slot_mapping)
    assert torch.equal(batch.k_cache.view(-1, kv_heads, dim)[batch.meta.slot_mapping], batch.new_keys)
    assert torch.equal(batch.v_cache.view(-1, kv_heads, dim)[batch.meta.slot_mapping], batch.new_values)


def test_oracle_write_kv_cache_stores_at_slots():
    batch = make_batch(**SMOLLM2, block_size=16, **MIXED)
    attention_torch.write_kv_cache(batch.new_keys, batch.new_values, batch.k_cache, batch.v_cache,
                                   batch.meta.slot_mapping)
    flat_keys = batch.k_cache.view(-1, *batch.k_cache.shape[2:])
    flat_values = batch.v_cache.view(-1, *batch.v_cache.shape[2:])
    assert torch.equal(flat_keys[batch.meta.slot_mapping], batch.new_keys)
    assert torch.equal(flat_values[batch.meta.slot_mapping], batch.new_values)


# ---------------------------------------------------------------------------------
# The Triton kernels (interpreted) against the oracle


def test_available_matches_environment():
    expected = HAS_TRITON and (torch.cuda.is_available() or INTERPRETED)
    assert attention_triton.available() == expected


@pytest.mark.skipif(INTERPRETED or not HAS_TRITON, reason="needs Triton; not recursive")
def test_triton_kernels_interpreted():
    assert_passes_interpreted(__file__)


compiles_for_gpu = pytest.mark.skipif(
    INTERPRETED or not HAS_TRITON, reason="compiles the real (not interpreted) kernels")


def compile_for_gpu(kernel, pointer_types: dict[str, str], constexprs: dict, float_args=("qk_scale",)):
    """Compile a kernel down to an sm_90 cubin without a GPU (Triton bundles ptxas).

    The interpreter runs code no GPU compiler would accept (e.g. dots smaller than
    16); this catches that. Other scalars are typed i32.
    """
    compiler = pytest.importorskip("triton.compiler")
    target = pytest.importorskip("triton.backends.compiler").GPUTarget("cuda", 90, 32)
    names = list(inspect.signature(kernel.fn).parameters)
    signature = {
        name: "constexpr" if name in constexprs
        else pointer_types.get(name, "fp32" if name in float_args else "i32")
        for name in names
    }
    source = compiler.ASTSource(
        kernel, signature, constexprs={(names.index(name),): value for name, value in constexprs.items()})
    with warnings.catch_warnings():  # Triton 3.9 nags about a default changing in 3.10
        warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
        return compiler.compile(source, target=target)


@compiles_for_gpu
@pytest.mark.parametrize("dtype, head_dim", [(torch.bfloat16, 128), (torch.float32, 64)])
def test_attention_kernels_compile_for_gpu(dtype, head_dim):
    element = {torch.bfloat16: "*bf16", torch.float32: "*fp32"}[dtype]
    pointers = {"query_ptr": element, "k_cache_ptr": element, "v_cache_ptr": element, "out_ptr": element,
                    "k_scale_ptr": element, "v_scale_ptr": element,  # unread without QUANTIZED
                    "block_tables_ptr": "*i32", "seq_lens_ptr": "*i32", "query_start_loc_ptr": "*i32"}
    for kernel, config in (
        (attention_triton._decode_kernel, attention_triton.decode_config(3, 16, head_dim, dtype)),
        (attention_triton._prefill_kernel, attention_triton.prefill_config(3, 16, head_dim, dtype)),
    ):
        compiled = compile_for_gpu(kernel, pointers, {**config, "QUANTIZED": False})
        assert compiled.metadata.shared <= 160 * 1024


@compiles_for_gpu
def test_write_kv_kernel_compiles_for_gpu():
    pointers = {"key_ptr": "*bf16", "value_ptr": "*bf16", "k_cache_ptr": "*bf16", "v_cache_ptr": "*bf16",
                    "k_scale_ptr": "*bf16", "v_scale_ptr": "*bf16", "slot_mapping_ptr": "*i64"}
    compile_for_gpu(attention_triton._write_kv_kernel, pointers, {"BLOCK_SIZE": 16, "BLOCK_H": 4, "BLOCK_D": 64,
                                                                  "QUANTIZED": False, "LARGEST": 0.0,
                                                                  "ROUND_TO_INT": False})


TRITON_CASES = {
    "smollm2-mixed": dict(**SMOLLM2, block_size=16, **MIXED),
    "mha-mixed-d128": dict(**MHA, block_size=16, **MIXED),
    "decodes-only": dict(**SMOLLM2, block_size=16, decode_lens=[1, 63, 64, 65, 130], prefills=[]),
    "prefills-only-long": {"heads": 4, "kv_heads": 2, "head_dim": 64, "block_size": 16, "decode_lens": [],
                               "prefills": [(0, 70), (50, 66), (0, 1)]},
    "block-size-8-d32": dict(heads=4, kv_heads=1, head_dim=32, block_size=8, **MIXED),
    "block-size-32-d16": dict(heads=4, kv_heads=2, head_dim=16, block_size=32, **MIXED),
    "block-size-64-d256": {"heads": 2, "kv_heads": 1, "head_dim": 256, "block_size": 64,
                               "decode_lens": [5, 70], "prefills": [(40, 9)]},
    "head-dim-80": dict(heads=6, kv_heads=2, head_dim=80, block_size=16, **MIXED),
    "nan-garbage": dict(**SMOLLM2, block_size=16, **MIXED, garbage=float("nan")),
}
HALF_TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 3e-2}


class TestTritonInterpreted:
    # Collected in the TRITON_INTERPRET=1 process that test_triton_kernels_interpreted starts,
    # and on a machine with a GPU, where the kernels run compiled.
    __test__ = INTERPRETED or KERNEL_DEVICE == "cuda"

    @pytest.mark.parametrize("case", TRITON_CASES)
    def test_matches_oracle_fp32(self, case):
        spec = TRITON_CASES[case]
        batch = make_batch(**spec, device=KERNEL_DEVICE)
        # The oracle reads padded cache slots, so it gets a garbage-free copy of the batch.
        oracle = run_attention(attention_torch, make_batch(**{**spec, "garbage": 0.0}))
        out = run_attention(attention_triton, batch)
        assert out.dtype == torch.float32
        assert max_error(out, oracle) < 1e-4
        assert max_error(out, naive_attention(batch)) < 1e-4

    @pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
    def test_half_precision(self, dtype):
        batch = make_batch(**SMOLLM2, block_size=16, **MIXED, dtype=dtype, device=KERNEL_DEVICE)
        out = run_attention(attention_triton, batch)
        assert out.dtype == dtype
        assert max_error(out, naive_attention(batch)) < HALF_TOLERANCE[dtype]

    def test_write_kv_cache_matches_oracle(self):
        expected = make_batch(**SMOLLM2, block_size=16, **MIXED, dtype=torch.float16)
        actual = make_batch(**SMOLLM2, block_size=16, **MIXED, dtype=torch.float16, device=KERNEL_DEVICE)
        for backend, batch in ((attention_torch, expected), (attention_triton, actual)):
            # fp32 inputs into an fp16 cache: both must cast the same way.
            backend.write_kv_cache(batch.new_keys.float(), batch.new_values.float(),
                                   batch.k_cache, batch.v_cache, batch.meta.slot_mapping)
        assert torch.equal(actual.k_cache.cpu(), expected.k_cache)
        assert torch.equal(actual.v_cache.cpu(), expected.v_cache)

    def test_write_kv_cache_skips_padding_slots(self):
        batch = make_batch(**SMOLLM2, block_size=16, decode_lens=[5, 9], prefills=[], device=KERNEL_DEVICE)
        slots = batch.meta.slot_mapping.clone()
        slots[0] = -1
        k_before, v_before = batch.k_cache.clone(), batch.v_cache.clone()
        attention_triton.write_kv_cache(batch.new_keys, batch.new_values, batch.k_cache, batch.v_cache, slots)
        k_before.view(-1, 3, 64)[slots[1]] = batch.new_keys[1]
        v_before.view(-1, 3, 64)[slots[1]] = batch.new_values[1]
        assert torch.equal(batch.k_cache, k_before)
        assert torch.equal(batch.v_cache, v_before)

    def test_strided_inputs(self):
        """Q, K, V as views of one fused projection, as a model produces them."""
        batch = make_batch(**SMOLLM2, block_size=16, **MIXED, device=KERNEL_DEVICE)
        oracle = run_attention(attention_torch, make_batch(**SMOLLM2, block_size=16, **MIXED))
        tokens = batch.query.shape[0]
        fused = torch.cat([batch.query.reshape(tokens, -1), batch.new_keys.reshape(tokens, -1),
                           batch.new_values.reshape(tokens, -1)], dim=1)
        query, keys, values = fused.split([9 * 64, 3 * 64, 3 * 64], dim=1)
        batch.query = query.view(tokens, 9, 64)
        batch.new_keys = keys.view(tokens, 3, 64)
        batch.new_values = values.view(tokens, 3, 64)
        assert not batch.query.is_contiguous()
        assert max_error(run_attention(attention_triton, batch), oracle) < 1e-4

    def test_empty_context_decode_gives_zeros(self):
        """A padded decode row (seq_len 0, as in a padded CUDA-graph batch) must not produce NaN."""
        batch = make_batch(**SMOLLM2, block_size=16, decode_lens=[7, 3], prefills=[(4, 5)],
                           device=KERNEL_DEVICE)
        attention_triton.write_kv_cache(batch.new_keys, batch.new_values, batch.k_cache, batch.v_cache,
                                        batch.meta.slot_mapping)
        expected = naive_attention(batch)
        batch.meta.seq_lens[1] = 0
        out = attention_triton.paged_attention(batch.query, batch.k_cache, batch.v_cache, batch.meta,
                                               batch.scale)
        assert torch.equal(out[1], torch.zeros_like(out[1]))
        keep = [0, 2, 3, 4, 5, 6]
        assert max_error(out[keep], expected[keep]) < 1e-4


# ---------------------------------------------------------------------------------
# The C kernel (CPU, float32) that the oracle runs float32 steps through


def only_sequence(batch: Batch, b: int) -> tuple[torch.Tensor, AttentionMetadata]:
    """Sequence b's new tokens and the metadata of a step with nothing else in it."""
    meta, starts = batch.meta, batch.meta.query_start_loc.tolist()
    query_len, seq_len = meta.query_lens_cpu[b], meta.seq_lens_cpu[b]
    alone = AttentionMetadata(
        query_start_loc=torch.tensor([0, query_len], dtype=torch.int32), seq_lens=meta.seq_lens[b : b + 1],
        block_tables=meta.block_tables[b : b + 1].contiguous(),
        slot_mapping=meta.slot_mapping[starts[b] : starts[b + 1]], num_decodes=int(b < meta.num_decodes),
        max_query_len=query_len, max_seq_len=seq_len, query_lens_cpu=[query_len], seq_lens_cpu=[seq_len])
    return batch.query[starts[b] : starts[b + 1]].contiguous(), alone


@pytest.mark.parametrize("case", ["smollm2-mixed", "mha-mixed", "decodes-only", "prefills-only", "block-size-8"])
def test_c_rows_match_naive_their_portable_twin_and_themselves_in_any_batch(case):
    """Every new token -- decode or prompt -- held to the naive reference, the AVX2 path to
    the portable one bit for bit, and each sequence's rows to the bits it gets in a step
    of its own (what makes a prompt's logits independent of what it is batched with). NaN
    in every slot nobody owns: the kernel reads only each row's own positions."""
    batch = make_batch(**ORACLE_CASES[case], garbage=float("nan"))
    attention_torch.write_kv_cache(batch.new_keys, batch.new_values, batch.k_cache, batch.v_cache,
                                   batch.meta.slot_mapping)
    query = batch.query.contiguous()
    assert attention_torch.rows_in_c(query, batch.k_cache, batch.v_cache, batch.meta)
    fast = attention_torch.attention_rows_c(query, batch.k_cache, batch.v_cache, batch.meta, batch.scale)
    portable = attention_torch.attention_rows_c(query, batch.k_cache, batch.v_cache, batch.meta, batch.scale,
                                                portable=True)
    assert torch.equal(fast, portable)
    assert torch.isfinite(fast).all()
    assert max_error(fast, naive_attention(batch)) < 1e-5
    starts = batch.meta.query_start_loc.tolist()
    for b in range(batch.meta.num_seqs):
        rows, alone = only_sequence(batch, b)
        single = attention_torch.attention_rows_c(rows, batch.k_cache, batch.v_cache, alone, batch.scale)
        assert torch.equal(single, fast[starts[b] : starts[b + 1]])


def test_c_rows_of_a_long_prompt_in_chunks_give_the_bits_of_one_chunk():
    """A 300-token prompt attended in one step, or in chunks of 64 whose earlier tokens
    are cached, gives every token the same bits (four positions at a time, eight-lane
    sums and their tails all cross chunk edges here)."""
    batch = make_batch(**SMOLLM2, block_size=16, decode_lens=[], prefills=[(0, 300)], seed=5)
    attention_torch.write_kv_cache(batch.new_keys, batch.new_values, batch.k_cache, batch.v_cache,
                                   batch.meta.slot_mapping)
    whole = attention_torch.attention_rows_c(batch.query.contiguous(), batch.k_cache, batch.v_cache, batch.meta,
                                             batch.scale)
    assert max_error(whole, naive_attention(batch)) < 1e-5
    table = batch.meta.block_tables[:1].contiguous()
    for start in range(0, 300, 64):
        end = min(start + 64, 300)
        chunk = AttentionMetadata(
            query_start_loc=torch.tensor([0, end - start], dtype=torch.int32),
            seq_lens=torch.tensor([end], dtype=torch.int32), block_tables=table,
            slot_mapping=batch.meta.slot_mapping[start:end], num_decodes=0, max_query_len=end - start,
            max_seq_len=end, query_lens_cpu=[end - start], seq_lens_cpu=[end])
        part = attention_torch.attention_rows_c(batch.query[start:end].contiguous(), batch.k_cache, batch.v_cache,
                                                chunk, batch.scale)
        assert torch.equal(part, whole[start:end])


def test_c_rows_are_left_out_for_what_they_cannot_take():
    batch = make_batch(**ORACLE_CASES["decodes-only"])
    assert not attention_torch.rows_in_c(batch.query.double(), batch.k_cache, batch.v_cache, batch.meta)
    odd = make_batch(heads=2, kv_heads=1, head_dim=12, block_size=16, decode_lens=[5], prefills=[])
    assert not attention_torch.rows_in_c(odd.query, odd.k_cache, odd.v_cache, odd.meta)
    expected = naive_attention(odd)  # the torch path still serves them
    assert max_error(run_attention(attention_torch, odd), expected) < 1e-5
