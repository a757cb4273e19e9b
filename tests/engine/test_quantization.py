"""Weight-only quantization (structgen.engine.models.quantization): each quantized layer
multiplies as its dequantized weight does, stays within its rounding of the float
weight, refuses at load what it cannot run (naming the layer or the device), and an
engine built with it decodes like the float one. GGUF weights (models.gguf_weights)
decode as gguf's own dequantization does, bit for bit, and the layers a file stores in 4
to 8 bits (the embedded model's Q4_1; Q3_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0) become layers as
they are stored."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter
from gguf import quants as gguf_quants
from torch import nn

from structgen.engine import Engine
from structgen.engine.config import EngineConfig
from structgen.engine.models import gguf_weights, quantization
from structgen.engine.models.quantization import QuantizationError, quantize_model, quantized_linear
from structgen.engine.sampling_params import SamplingParams
from tests.engine.activation_blocks import quantized_activations
from tests.engine.tiny_models import TINY_SMOLLM_SHAPE, make_checkpoint

SHAPES = [(64, 96), (576, 1536), (48, 256)]  # (out, in): square-ish, the embedded model's MLP, thin


def layer_and_input(out_features: int, in_features: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(out_features, in_features, generator=gen) * 0.05
    bias = torch.randn(out_features, generator=gen) * 0.01
    x = torch.randn(3, in_features, generator=gen)
    return weight, bias, x


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_quantized_layer_multiplies_as_its_dequantized_weight(mode, shape):
    weight, bias, x = layer_and_input(*shape)
    layer = quantized_linear("layer", weight, bias, mode, group_size=32)
    # on CPU the layer multiplies in bfloat16: its input, and its output, are rounded to it
    reference = x.bfloat16().float() @ layer.dequantized().T + bias
    assert torch.allclose(layer.forward(x), reference, rtol=2**-7, atol=2**-7 * reference.abs().max().item())


@pytest.mark.parametrize("mode", ["int8", "int4", "fp8"])
def test_the_stored_weight_is_within_its_rounding_of_the_float_one(mode):
    weight, bias, _ = layer_and_input(64, 256)
    layer = quantized_linear("layer", weight, bias, mode, group_size=64)
    error = (layer.dequantized() - weight).abs()
    if mode == "int8":  # half a step of the row's scale
        assert (error <= layer.scale.float()[:, None] / 2 + 1e-7).all()
    elif mode == "int4":  # half a step of the group's scale, and the rounding of its zero to bfloat16
        scale, zero = (part.float().T.repeat_interleave(64, dim=1) for part in layer.scales_and_zeros.unbind(-1))
        assert (error <= scale / 2 + zero.abs() * 2.0**-8 + 1e-7).all()
    else:  # e4m3 keeps 3 mantissa bits: within 1/16 of the value, or of the row's smallest normal
        assert (error <= weight.abs() / 16 + layer.scale.T * 2.0**-6).all()
    assert error.max() > 0  # it did quantize


def test_int4_packs_two_weights_per_byte_and_int8_one():
    weight, bias, _ = layer_and_input(64, 256)
    assert quantized_linear("l", weight, bias, "int8").qweight.nbytes == 64 * 256
    assert quantized_linear("l", weight, bias, "int4", group_size=32).packed.nbytes == 64 * 256 // 2


def test_what_cannot_run_is_refused_by_name():
    weight, bias, _ = layer_and_input(64, 96)
    with pytest.raises(QuantizationError, match=r"group size 64 does not divide the 96 input columns of layers.3.mlp"):
        quantized_linear("layers.3.mlp.down", weight, bias, "int4", group_size=64)
    with pytest.raises(QuantizationError, match="unknown quantization 'int3'"):
        EngineConfig(quantization="int3")
    with pytest.raises(QuantizationError, match="group size must be one of"):
        EngineConfig(quantization="int4", quantization_group_size=48)
    with pytest.raises(QuantizationError, match="fp8 weights need a GPU of compute capability 8.9"):
        Engine(TINY_SMOLLM_SHAPE, load_format="dummy", quantization="fp8", kv_cache_bytes=1 << 20)


def test_quantize_model_replaces_every_decoder_linear_layer_and_keeps_the_head_float():
    config = {**TINY_SMOLLM_SHAPE, "tie_word_embeddings": False}
    engine = Engine(config, load_format="dummy", quantization="int8", kv_cache_bytes=1 << 20)
    model = engine.model
    assert [name for name, module in model.named_modules() if isinstance(module, nn.Linear)] == ["lm_head"]
    assert isinstance(model.layers[0].attn.qkv, quantization.Int8Linear)
    hidden = torch.randn(2, config["hidden_size"])
    assert model.compute_logits(hidden).dtype == torch.float32


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_a_quantized_engine_decodes_like_the_float_one(mode):
    """Greedy decoding of a random model of the embedded model's shape: the quantized
    engine's logits stay close to the float engine's along the float engine's tokens."""
    float_engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", kv_cache_bytes=8 << 20)
    quantized = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", kv_cache_bytes=8 << 20, quantization=mode)
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    prompt = list(range(5, 40))
    expected = float_engine.generate([prompt], params)[0].token_ids
    got = quantized.generate([prompt], params)[0].token_ids
    agreeing = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), len(expected))
    assert agreeing >= 8, (expected, got)


def test_quantize_model_with_none_leaves_the_model_alone():
    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", kv_cache_bytes=1 << 20)
    before = {name: p.clone() for name, p in engine.model.named_parameters()}
    quantize_model(engine.model, None)
    assert all(torch.equal(before[name], p) for name, p in engine.model.named_parameters())


# -- GGUF weights read as they are stored ------------------------------------------------

GGUF_FORMATS = ["Q4_0", "Q4_1", "Q4_K", "Q8_0", "Q5_0", "Q5_1", "Q5_K", "Q6_K", "Q3_K"]
INT8_FORMATS = ("Q8_0", "Q5_0", "Q5_1", "Q5_K", "Q6_K", "Q3_K")
HALF_GROUP_FORMATS = ("Q6_K", "Q3_K")  # a scale per 16 weights
MINIMUM_FORMATS = ("Q5_1", "Q5_K")  # int8 values with a minimum per 32


def random_blocks(fmt: str, rows: int, cols: int, rng) -> np.ndarray:
    """Stored bytes of a `fmt` tensor: random values, with finite f16 scales (at the start
    of each block, but Q6_K's and Q3_K's one at its end)."""
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[fmt]]
    data = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    scales = 2 if fmt in ("Q4_1", "Q4_K", "Q5_1", "Q5_K") else 1
    values = (rng.standard_normal((rows, cols // block, scales)) * 0.01).astype(np.float16)
    where = slice(size - 2, size) if fmt in HALF_GROUP_FORMATS else slice(0, 2 * scales)
    data[..., where] = values.view(np.uint8).reshape(rows, cols // block, 2 * scales)
    return data.reshape(rows, -1)


def written_layers(path, parts: dict[str, tuple[str, int]], seed: int) -> dict[str, np.ndarray]:
    """A GGUF file at `path` of layer 0's tensors `parts` (GGUF name: format and rows, 256
    columns of random blocks), written with gguf's own writer; gguf's dequantization of
    each, by tensor name."""
    rng = np.random.default_rng(seed)
    writer = GGUFWriter(str(path), "llama")
    for name, (fmt, rows) in parts.items():
        writer.add_tensor(f"blk.0.{name}.weight", random_blocks(fmt, rows, 256, rng),
                          raw_dtype=GGMLQuantizationType[fmt])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {name: tensor.dequantize() for name, tensor in gguf_weights.read_tensors(path).items()}


@pytest.fixture(scope="module")
def written_gguf(tmp_path_factory):
    """A GGUF file written with gguf's own writer, one small tensor per format."""
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("gguf") / "small.gguf"
    writer = GGUFWriter(str(path), "llama")
    tensors = {}
    for fmt in GGUF_FORMATS:
        data = random_blocks(fmt, 16, 512, rng)
        writer.add_tensor(f"t.{fmt}", data, raw_dtype=GGMLQuantizationType[fmt])  # shape: its bytes
        tensors[fmt] = data
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, tensors


@pytest.mark.parametrize("fmt", GGUF_FORMATS)
def test_each_gguf_format_decodes_as_ggufs_own_dequantization_bit_for_bit(written_gguf, fmt):
    path, written = written_gguf
    tensor = gguf_weights.read_tensors(path)[f"t.{fmt}"]
    assert (tensor.format, tensor.rows, tensor.cols) == (fmt, 16, 512)
    expected = gguf_quants.dequantize(written[fmt], GGMLQuantizationType[fmt]).astype(np.float32).reshape(16, 512)
    decoded = tensor.decoded()
    assert isinstance(decoded, gguf_weights.Int8Blocks if fmt in INT8_FORMATS else gguf_weights.Int4Blocks)
    assert np.array_equal(decoded.dequantize(), expected)


@pytest.mark.parametrize("fmt", INT8_FORMATS)
def test_an_8_bit_gguf_tensor_becomes_a_native_cpu_layer_exactly_as_stored(written_gguf, fmt):
    """Q8_0, Q5_0, Q5_1, Q5_K, Q6_K and Q3_K are held as int8 values with their own scales
    (Q6_K and Q3_K: one per 16 weights, the others one per 32) and, for Q5_1 and Q5_K,
    minimums: the layer's weight is gguf's own dequantization, bit for bit, and it
    multiplies as that weight does, within its activations' int8 rounding."""
    path, _ = written_gguf
    blocks = gguf_weights.read_tensors(path)[f"t.{fmt}"].decoded()
    assert blocks.scale.shape == (16, 512 // (16 if fmt in HALF_GROUP_FORMATS else 32))
    assert (blocks.minimum is not None) == (fmt in MINIMUM_FORMATS)
    minimum = None if blocks.minimum is None else torch.from_numpy(blocks.minimum)
    expected = torch.from_numpy(blocks.dequantize())
    layer = quantization.Int8BlockLinear(torch.from_numpy(blocks.q), torch.from_numpy(blocks.scale),
                                         minimum=minimum)
    assert torch.equal(layer.dequantized(), expected)
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(0))
    exact = x.double() @ expected.double().T
    assert ((layer(x).double() - exact).norm() / exact.norm()) < 0.02


def test_8_bit_parts_fuse_into_one_layer_and_4_and_8_bit_parts_into_a_split_one(tmp_path):
    """As in a Q4_K_M file: q and k in Q5_0 with v in Q6_K make one int8 layer, its Q5_0
    scales given per 16 as Q6_K's are (the weights unchanged); gate in Q4_K with up in
    Q8_0 make a SplitBlocks of the two, which the blocks' cache keeps as they are, and
    which native runs as a SplitLinear giving each part's own product."""
    path = tmp_path / "mixed.gguf"
    tensors = written_layers(path, {"attn_q": ("Q5_0", 64), "attn_k": ("Q5_0", 32), "attn_v": ("Q6_K", 32),
                                    "ffn_gate": ("Q4_K", 64), "ffn_up": ("Q8_0", 64)}, seed=1)
    stored = gguf_weights.stored_linears(path, num_heads=2, num_kv_heads=1, cache=tmp_path / "blocks.safetensors")
    qkv, gate_up = stored["layers.0.attn.qkv"], stored["layers.0.mlp.gate_up"]
    assert isinstance(qkv, gguf_weights.Int8Blocks) and qkv.scale.shape == (128, 256 // 16)
    expected_qkv = np.concatenate([tensors["blk.0.attn_q.weight"][gguf_weights.unpermute_rows(64, 2)],
                                   tensors["blk.0.attn_k.weight"][gguf_weights.unpermute_rows(32, 1)],
                                   tensors["blk.0.attn_v.weight"]])
    assert np.array_equal(qkv.dequantize(), expected_qkv)
    assert isinstance(gate_up, gguf_weights.SplitBlocks)
    assert [type(part) for part in gate_up.parts] == [gguf_weights.Int4Blocks, gguf_weights.Int8Blocks]
    expected_gate_up = np.concatenate([tensors["blk.0.ffn_gate.weight"], tensors["blk.0.ffn_up.weight"]])
    assert np.array_equal(gate_up.dequantize(), expected_gate_up)
    cached = gguf_weights.stored_linears(path, 2, 1, cache=tmp_path / "blocks.safetensors")
    assert np.array_equal(cached["layers.0.mlp.gate_up"].dequantize(), expected_gate_up)
    assert np.array_equal(cached["layers.0.attn.qkv"].dequantize(), expected_qkv)
    model = nn.Module()
    model.embed = nn.Embedding(4, 256)
    model.gate_up = nn.Linear(256, 128, bias=False)
    quantize_model(model, "native", stored={"gate_up": cached["layers.0.mlp.gate_up"]})
    assert isinstance(model.gate_up, quantization.SplitLinear)
    assert torch.equal(model.gate_up.dequantized(), torch.from_numpy(expected_gate_up))
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(0))
    assert torch.equal(model.gate_up(x), torch.cat([part(x) for part in model.gate_up.parts], dim=-1))
    exact = x.double() @ torch.from_numpy(expected_gate_up).double().T
    assert ((model.gate_up(x).double() - exact).norm() / exact.norm()) < 0.02


def test_parts_with_and_without_minimums_fuse_into_one_int8_layer(tmp_path):
    """As in a Q5_K_M file: q and k in Q5_K (a minimum per 32) with v in Q6_K (none, a
    scale per 16) make one int8 layer with scales per 16 and minimums (v's zero), equal
    to gguf's dequantization through the blocks' cache too; native runs it as one
    Int8BlockLinear. A Q3_K down projection is one too."""
    path = tmp_path / "q5_k_m.gguf"
    tensors = written_layers(path, {"attn_q": ("Q5_K", 64), "attn_k": ("Q5_K", 32), "attn_v": ("Q6_K", 32),
                                    "ffn_down": ("Q3_K", 64)}, seed=2)
    expected_qkv = np.concatenate([tensors["blk.0.attn_q.weight"][gguf_weights.unpermute_rows(64, 2)],
                                   tensors["blk.0.attn_k.weight"][gguf_weights.unpermute_rows(32, 1)],
                                   tensors["blk.0.attn_v.weight"]])
    cache = tmp_path / "blocks.safetensors"
    for _read_or_cached in range(2):
        stored = gguf_weights.stored_linears(path, 2, 1, cache=cache)
        qkv, down = stored["layers.0.attn.qkv"], stored["layers.0.mlp.down"]
        assert isinstance(qkv, gguf_weights.Int8Blocks)
        assert qkv.scale.shape == (128, 16) and qkv.minimum.shape == (128, 8)
        assert not qkv.minimum[96:].any() and qkv.minimum[:96].any()
        assert np.array_equal(qkv.dequantize(), expected_qkv)
        assert isinstance(down, gguf_weights.Int8Blocks) and down.minimum is None
        assert np.array_equal(down.dequantize(), tensors["blk.0.ffn_down.weight"])
    model = nn.Module()
    model.embed = nn.Embedding(4, 256)
    model.qkv = nn.Linear(256, 128, bias=False)
    quantize_model(model, "native", stored={"qkv": qkv})
    assert isinstance(model.qkv, quantization.Int8BlockLinear)
    assert torch.equal(model.qkv.dequantized(), torch.from_numpy(expected_qkv))
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(0))
    exact = x.double() @ torch.from_numpy(expected_qkv).double().T
    assert ((model.qkv(x).double() - exact).norm() / exact.norm()) < 0.02


@pytest.mark.parametrize("fmt", ["Q4_0", "Q4_1", "Q4_K"])
def test_a_4_bit_gguf_tensor_becomes_an_int4_layer_as_stored(written_gguf, fmt):
    """Its 4-bit values are taken as they are; only its scales and zeros are rounded, to
    the bfloat16 the CPU kernel reads them in (half its relative step, 2**-8, each)."""
    path, written = written_gguf
    blocks = gguf_weights.read_tensors(path)[f"t.{fmt}"].decoded()
    layer = quantization.Int4Linear.from_blocks(*(torch.from_numpy(getattr(blocks, f)) for f in
                                                  ("q", "scale", "minimum")), None, torch.float32)
    expected = torch.from_numpy(blocks.dequantize())
    scale = torch.from_numpy(blocks.scale).repeat_interleave(32, dim=1).abs()
    zero = torch.from_numpy(blocks.minimum + 8 * blocks.scale).repeat_interleave(32, dim=1).abs()
    assert ((layer.dequantized() - expected).abs() <= (8 * scale + zero) * 2.0**-8 + 1e-9).all()


@pytest.mark.parametrize("fmt", ["Q4_0", "Q4_1", "Q4_K"])
def test_a_4_bit_gguf_tensor_becomes_a_native_cpu_layer_exactly_as_stored(written_gguf, fmt):
    """Native on CPU holds the 4-bit values, scales and minimums as decoded: its weight
    is gguf's own dequantization, bit for bit."""
    path, _ = written_gguf
    blocks = gguf_weights.read_tensors(path)[f"t.{fmt}"].decoded()
    layer = quantization.Int4BlockLinear(*(torch.from_numpy(getattr(blocks, f)) for f in ("q", "scale", "minimum")),
                                         None)
    assert torch.equal(layer.dequantized(), torch.from_numpy(blocks.dequantize()))


def test_the_embedded_gguf_is_read_as_stored_and_matches_its_float_conversion(tmp_path):
    """Every decoder linear layer of the embedded file (Q4_1), fused and with the
    Q/K rows put back in the model's order, and its head (the tied embedding table,
    Q8_0), equal the float weights transformers converted from the same file."""
    from safetensors.numpy import load_file

    from structgen import default_model

    path = default_model.default_gguf_path()
    stored = gguf_weights.stored_linears(path, 9, 3, cache=tmp_path / "stored.safetensors")
    assert len(stored) == 30 * 4 + 1 and (tmp_path / "stored.safetensors").is_file()
    head = stored.pop("lm_head")
    assert all(isinstance(blocks, gguf_weights.Int4Blocks) for blocks in stored.values())
    floats = load_file(str(default_model.gguf_as_hf_dir(path) / "model.safetensors"))
    assert isinstance(head, gguf_weights.Int8Blocks)
    assert np.array_equal(head.dequantize(), floats["model.embed_tokens.weight"])
    for layer in (0, 29):
        hf = f"model.layers.{layer}."
        qkv = np.concatenate([floats[hf + f"self_attn.{p}_proj.weight"] for p in "qkv"])
        gate_up = np.concatenate([floats[hf + f"mlp.{p}_proj.weight"] for p in ("gate", "up")])
        assert np.array_equal(stored[f"layers.{layer}.attn.qkv"].dequantize(), qkv)
        assert np.array_equal(stored[f"layers.{layer}.mlp.gate_up"].dequantize(), gate_up)
        assert np.array_equal(stored[f"layers.{layer}.mlp.down"].dequantize(), floats[hf + "mlp.down_proj.weight"])
    cached = gguf_weights.stored_linears(path, 9, 3, cache=tmp_path / "stored.safetensors")
    assert np.array_equal(cached["layers.5.attn.qkv"].q, stored["layers.5.attn.qkv"].q)
    assert np.array_equal(cached["lm_head"].q, head.q) and np.array_equal(cached["lm_head"].scale, head.scale)


def test_the_default_is_native_for_the_embedded_model_only(tmp_path):
    """"auto", the default, runs the embedded model's GGUF layers as stored on CPU; None,
    "float" and any other checkpoint stay float."""
    assert EngineConfig().quantization == "auto"
    default = Engine(kv_cache_bytes=16 << 20)
    assert default.quantization == "native"
    assert isinstance(default.model.layers[0].attn.qkv, quantization.Int4BlockLinear)
    for mode in (None, "float"):
        engine = Engine(quantization=mode, kv_cache_bytes=16 << 20)
        assert engine.quantization == "float" and type(engine.model.layers[0].attn.qkv) is nn.Linear
    make_checkpoint("llama", tmp_path)
    other = Engine(str(tmp_path), kv_cache_bytes=1 << 20)
    assert other.quantization == "float" and type(other.model.layers[0].attn.qkv) is nn.Linear
    with pytest.raises(QuantizationError, match="resolved by the engine"):
        quantize_model(other.model, "auto")


def test_native_runs_the_embedded_files_4_bit_layers_and_8_bit_head_as_stored():
    engine = Engine(quantization="native", kv_cache_bytes=64 << 20)
    assert isinstance(engine.model.layers[0].attn.qkv, quantization.Int4BlockLinear)
    assert isinstance(engine.model.layers[29].mlp.down, quantization.Int4BlockLinear)
    head, table = engine.model.lm_head, Engine(quantization="float", kv_cache_bytes=16 << 20).model.embed.weight
    assert isinstance(head, quantization.Int8BlockHead)
    assert torch.equal(head.dequantized(), table)  # the table the float engine reads
    # the tied table is looked up in the head's blocks (no float copy held), row for row as the float one
    assert isinstance(engine.model.embed, quantization.Int8BlockEmbedding)
    assert not any(tensor.dtype == torch.float32 and tensor.shape == table.shape
                   for tensor in [*engine.model.parameters(), *engine.model.buffers()])
    ids = torch.tensor([0, 1, 17, 49151, 17])
    assert torch.equal(engine.model.embed(ids), table[ids])
    hidden = torch.randn(3, engine.model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    float_logits = hidden.double() @ table.double().T
    logits = engine.model.compute_logits(hidden)
    assert logits.dtype == torch.float32
    # the head quantizes its input to int8 per block of 32: each value moves by at most half
    # its block's step d, so a logit by at most sum over blocks of d / 2 * sum |w|
    _, d = quantized_activations(hidden)
    moved = (d.double() / 2) @ table.abs().double().reshape(table.shape[0], -1, 32).sum(-1).T
    assert ((logits.double() - float_logits).abs() <= moved * (1 + 1e-3) + 1e-4).all()
    assert (logits.double() - float_logits).norm() / float_logits.norm() < 0.01
    params = SamplingParams(max_tokens=3, temperature=0.0)
    out = engine.generate(["The capital of France is"], params)[0]
    assert out.text.strip().startswith("Paris"), out.text


def test_native_says_in_one_line_which_layers_have_no_stored_form(caplog):
    """Layers a GGUF file stores in a format without a kernel here (Q2_K, F16, ...) run
    dequantized, and loading says so once."""
    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", quantization="float", kv_cache_bytes=1 << 20)
    qkv = engine.model.layers[0].attn.qkv.weight
    rng = np.random.default_rng(0)
    rows, cols = qkv.shape
    blocks = gguf_weights.Int4Blocks(rng.integers(0, 16, (rows, cols), dtype=np.uint8),
                                     np.full((rows, cols // 32), 0.01, np.float32),
                                     np.full((rows, cols // 32), -0.08, np.float32))
    with caplog.at_level("WARNING", logger="structgen.engine.models.quantization"):
        quantize_model(engine.model, "native", stored={"layers.0.attn.qkv": blocks})
    assert isinstance(engine.model.layers[0].attn.qkv, quantization.Int4BlockLinear)
    assert type(engine.model.layers[0].mlp.down) is nn.Linear
    layers = len(engine.model.layers) * 4
    [record] = caplog.records
    assert record.getMessage() == (f"native quantization: {layers - 1} decoder linear layers (layers.0.attn.o and "
                                   f"{layers - 2} more) are stored in a format other than Q3_K, Q4_0, Q4_1, Q4_K, "
                                   "Q5_0, Q5_1, Q5_K, Q6_K or Q8_0 and run dequantized to float")
