"""A KV cache at one byte per element (`kv_cache_dtype="int8"` or `"fp8"`): rows read back
within their format's rounding, attention over the cache matches naive attention over
what it holds, the Triton kernels (interpreted here, compiled on a GPU) store the same
bytes and scales as the torch path and attend as it does, the kernels compile for a
GPU, and an engine with such a cache keeps its guarantees: a prefix-cache hit gives a
cold prefill's logprobs, preemption changes no token, jump-forward keeps the text."""

from __future__ import annotations

import pytest
import torch

from structgen.engine import Engine, kv_cache
from structgen.engine.kernels import attention_torch, attention_triton, quantized_kv
from structgen.engine.kernels.quantized_kv import QuantizedCache
from structgen.engine.models.quantization import QuantizationError
from structgen.engine.sampling_params import InvalidParameterError
from tests.engine.interpreted import assert_passes_interpreted
from tests.engine.test_attention_kernels import (
    HALF_TOLERANCE,
    HAS_TRITON,
    INTERPRETED,
    KERNEL_DEVICE,
    MIXED,
    SMOLLM2,
    compile_for_gpu,
    compiles_for_gpu,
    make_batch,
    max_error,
    naive_attention,
)
from tests.engine.test_kv_cache_dtype import (
    assert_a_prefix_hit_gives_the_cold_logprobs,
    assert_jump_forward_keeps_the_text,
    assert_preemption_changes_no_token,
)

FORMATS = {"int8": torch.int8, "fp8": torch.float8_e4m3fn}


def quantized(batch, dtype: torch.dtype):
    """The batch's cache as a one-byte cache holding its cached prefixes, and the batch's
    context as the cache will hold it (what naive attention must be compared with)."""
    caches = []
    for cache in (batch.k_cache, batch.v_cache):
        values, scales = quantized_kv.quantize_rows(cache, dtype)
        caches.append(QuantizedCache(values, scales))
    for contexts in (batch.context_keys, batch.context_values):
        for i, rows in enumerate(contexts):
            values, scales = quantized_kv.quantize_rows(rows, dtype)
            contexts[i] = values.float() * scales[..., None]
    return caches


@pytest.mark.parametrize("name", FORMATS)
def test_rows_read_back_within_their_formats_rounding(name):
    dtype = FORMATS[name]
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(500, 3, 64, generator=generator) * 10.0 ** torch.randint(-3, 4, (500, 3, 1),
                                                                                generator=generator)
    rows[0, 0] = 0.0  # an all-zero row: scale 0, zeros back
    rows[1, 1, :5] = torch.tensor([1e-9, -3.0, 3.0, 2.5, -7.25])
    values, scales = quantized_kv.quantize_rows(rows, dtype)
    assert values.dtype is dtype and scales.shape == rows.shape[:-1]
    back = values.float() * scales[..., None]
    largest = rows.abs().amax(-1)
    assert torch.allclose(scales, largest / quantized_kv.LARGEST[dtype])
    assert scales[0, 0] == 0 and torch.equal(back[0, 0], torch.zeros(64))
    assert torch.allclose(back.abs().amax(-1), largest, rtol=1e-6)  # the largest is exact
    error = (back - rows).abs()
    if dtype is torch.int8:  # half a step of 1/127 of the row's largest
        assert (error <= scales[..., None] * 0.5 * (1 + 1e-5)).all()
    else:  # e4m3: 3 mantissa bits, subnormals below 2^-6 of the scale
        bound = torch.maximum(rows.abs() * 2.0**-4, scales[..., None] * 2.0**-10)
        assert (error <= bound * (1 + 1e-5)).all()


def test_int8_rounds_half_away_from_zero():
    rows = torch.tensor([[127.0, 0.5, -0.5, 1.5, -1.5, 2.49]])
    values, scales = quantized_kv.quantize_rows(rows, torch.int8)
    assert scales.item() == 1.0
    assert values.tolist() == [[127, 1, -1, 2, -2, 2]]


@pytest.mark.parametrize("name", FORMATS)
def test_attention_over_a_one_byte_cache_matches_naive(name):
    batch = make_batch(**SMOLLM2, block_size=16, **MIXED)
    k_cache, v_cache = quantized(batch, FORMATS[name])
    attention_torch.write_kv_cache(batch.new_keys, batch.new_values, k_cache, v_cache, batch.meta.slot_mapping)
    assert not attention_torch.rows_in_c(batch.query, k_cache, v_cache, batch.meta)
    out = attention_torch.paged_attention(batch.query, k_cache, v_cache, batch.meta, batch.scale)
    assert max_error(out, naive_attention(batch)) < 1e-5


def test_clearing_blocks_zeroes_values_and_scales():
    cache = QuantizedCache.zeros((4, 16, 3, 64), torch.float8_e4m3fn, "cpu")
    cache.values.fill_(1.0)
    cache.scales.fill_(2.0)
    kv_cache.clear_blocks(cache, torch.tensor([1, 3]))
    assert (cache.values[[1, 3]].float() == 0).all() and (cache.scales[[1, 3]] == 0).all()
    assert (cache.values[[0, 2]].float() == 1).all() and (cache.scales[[0, 2]] == 2).all()


class TestTritonInterpreted:
    # Collected in the TRITON_INTERPRET=1 process that test_triton_kernels_interpreted
    # starts, and on a machine with a GPU, where the kernels run compiled.
    __test__ = INTERPRETED or KERNEL_DEVICE == "cuda"

    @pytest.mark.parametrize("name", FORMATS)
    def test_the_write_kernel_stores_the_torch_paths_bytes_and_scales(self, name):
        batch = make_batch(**SMOLLM2, block_size=16, **MIXED)
        expected = quantized(batch, FORMATS[name])
        actual = [QuantizedCache(c.values.clone().to(KERNEL_DEVICE), c.scales.clone().to(KERNEL_DEVICE))
                  for c in expected]
        attention_torch.write_kv_cache(batch.new_keys, batch.new_values, *expected, batch.meta.slot_mapping)
        attention_triton.write_kv_cache(batch.new_keys.to(KERNEL_DEVICE), batch.new_values.to(KERNEL_DEVICE),
                                        *actual, batch.meta.slot_mapping.to(KERNEL_DEVICE))
        for want, got in zip(expected, actual):
            assert torch.equal(got.values.cpu().view(torch.uint8), want.values.view(torch.uint8))
            assert torch.equal(got.scales.cpu(), want.scales)

    @pytest.mark.parametrize("name", FORMATS)
    @pytest.mark.parametrize("query_dtype", [torch.float32, torch.bfloat16])
    def test_attention_agrees_with_the_torch_path(self, name, query_dtype):
        batch = make_batch(**SMOLLM2, block_size=16, **MIXED)
        k_cache, v_cache = quantized(batch, FORMATS[name])
        query = batch.query.to(query_dtype)
        attention_torch.write_kv_cache(batch.new_keys, batch.new_values, k_cache, v_cache, batch.meta.slot_mapping)
        expected = attention_torch.paged_attention(query, k_cache, v_cache, batch.meta, batch.scale)
        on_device = [QuantizedCache(c.values.to(KERNEL_DEVICE), c.scales.to(KERNEL_DEVICE)) for c in (k_cache, v_cache)]
        meta = batch.meta
        for field in ("query_start_loc", "seq_lens", "block_tables", "slot_mapping"):
            setattr(meta, field, getattr(meta, field).to(KERNEL_DEVICE))
        out = attention_triton.paged_attention(query.to(KERNEL_DEVICE), *on_device, meta, batch.scale)
        naive = naive_attention(batch)
        if query_dtype is torch.float32:
            assert max_error(out, expected) < 1e-4 and max_error(out, naive) < 1e-4
        else:  # each within the bound that bfloat16 attention is held to over a bfloat16 cache
            assert max_error(out, naive) < HALF_TOLERANCE[torch.bfloat16]
            assert max_error(expected, naive) < HALF_TOLERANCE[torch.bfloat16]

    def test_the_fp8_bytes_round_as_torch_converts(self):
        """Ties to even, carries into the exponent, subnormals: rows whose largest element is
        448 have scale 1, so the kernel converts the values themselves."""
        codes = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # 0 .. 448
        midpoints = (codes[:-1] + codes[1:]) / 2
        nudged = torch.cat([midpoints * (1 + 2.0**-20), midpoints * (1 - 2.0**-20)])
        generator = torch.Generator().manual_seed(0)
        spread = torch.rand(4000, generator=generator) * 448 * 2.0 ** -torch.randint(0, 20, (4000,),
                                                                                       generator=generator)
        values = torch.cat([codes, midpoints, nudged, spread])
        values = torch.cat([values, -values])
        rows = torch.cat([values, torch.zeros(-values.numel() % 63)]).view(-1, 63)
        rows = torch.cat([torch.full((rows.shape[0], 1), 448.0), rows], dim=1).view(-1, 1, 64)
        cache = QuantizedCache.zeros((rows.shape[0], 1, 1, 64), torch.float8_e4m3fn, KERNEL_DEVICE)
        slots = torch.arange(rows.shape[0], device=KERNEL_DEVICE)
        attention_triton.write_kv_cache(rows.to(KERNEL_DEVICE), rows.to(KERNEL_DEVICE), cache, cache, slots)
        assert torch.equal(cache.scales.cpu().view(-1), torch.ones(rows.shape[0]))
        assert torch.equal(cache.values.cpu().view(torch.uint8).view(-1, 64),
                           rows.view(-1, 64).to(torch.float8_e4m3fn).view(torch.uint8))


@pytest.mark.skipif(INTERPRETED or not HAS_TRITON, reason="needs Triton; not recursive")
def test_triton_kernels_interpreted():
    assert_passes_interpreted(__file__)


@compiles_for_gpu
@pytest.mark.parametrize("element", ["*i8", "*fp8e4nv"])
def test_the_one_byte_kernels_compile_for_gpu(element):
    caches = {"k_cache_ptr": element, "v_cache_ptr": element, "k_scale_ptr": "*fp32", "v_scale_ptr": "*fp32"}
    for kernel, config in (
        (attention_triton._decode_kernel, attention_triton.decode_config(3, 16, 64, torch.bfloat16)),
        (attention_triton._prefill_kernel, attention_triton.prefill_config(3, 16, 64, torch.bfloat16)),
    ):
        pointers = {"query_ptr": "*bf16", "out_ptr": "*bf16", "block_tables_ptr": "*i32", "seq_lens_ptr": "*i32",
                    "query_start_loc_ptr": "*i32", **caches}
        compile_for_gpu(kernel, pointers, {**config, "QUANTIZED": True})
    stored = "*i8" if element == "*i8" else "*u8"  # fp8 is written as its bytes (_e4m3_bytes)
    pointers = {"key_ptr": "*bf16", "value_ptr": "*bf16", "slot_mapping_ptr": "*i64", **caches,
                "k_cache_ptr": stored, "v_cache_ptr": stored}
    constexprs = {"BLOCK_SIZE": 16, "BLOCK_H": 4, "BLOCK_D": 64, "QUANTIZED": True,
                  "LARGEST": 127.0 if element == "*i8" else 448.0, "ROUND_TO_INT": element == "*i8"}
    compile_for_gpu(attention_triton._write_kv_kernel, pointers, constexprs)


# ---------------------------------------------------------------------------------
# An engine over a one-byte cache


@pytest.fixture(scope="module", params=list(FORMATS))
def embedded(request):
    engine = Engine(kv_cache_bytes=48 << 20, kv_cache_dtype=request.param)
    assert engine.kv_dtype is FORMATS[request.param] and engine.runner.fused_step is None
    assert isinstance(engine.runner.kv_caches[0][0], QuantizedCache)
    return engine


def test_a_one_byte_cache_holds_nearly_twice_a_float16_ones_tokens():
    half = Engine(kv_cache_bytes=32 << 20, kv_cache_dtype="float16")
    one_byte = Engine(kv_cache_bytes=32 << 20, kv_cache_dtype="int8")
    assert one_byte.blocks.num_blocks >= 1.85 * half.blocks.num_blocks  # 1 + 4/64 bytes against 2


def test_a_prefix_hit_over_a_one_byte_cache_gives_the_cold_logprobs(embedded):
    assert_a_prefix_hit_gives_the_cold_logprobs(embedded)


@pytest.mark.parametrize("name", FORMATS)
def test_preemption_over_a_one_byte_cache_changes_no_token(name):
    assert_preemption_changes_no_token(name)


def test_jump_forward_over_a_one_byte_cache_keeps_the_text(embedded):
    """The torch path's decode and prefill attention sum in different orders, so a near-tie
    can go either way between them. The closed schema leaves no property to choose: with
    an open object, one fp8 run added a third property where the other closed it."""
    assert_jump_forward_keeps_the_text(embedded, closed=True)


def test_the_formats_are_taken_by_name_and_by_dtype():
    assert Engine(kv_cache_bytes=8 << 20, kv_cache_dtype=torch.int8).kv_dtype is torch.int8
    assert Engine(kv_cache_bytes=8 << 20, kv_cache_dtype="float8_e4m3fn").kv_dtype is torch.float8_e4m3fn
    with pytest.raises(InvalidParameterError, match="kv_cache_dtype.*int8, fp8"):
        Engine(kv_cache_bytes=8 << 20, kv_cache_dtype="int4")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_fp8_on_a_gpu_without_it_is_refused_naming_the_capability():
    if torch.cuda.get_device_capability() >= (8, 9):
        pytest.skip("this GPU runs fp8")
    with pytest.raises(QuantizationError, match="compute capability 8.9"):
        Engine(kv_cache_dtype="fp8", device="cuda")
