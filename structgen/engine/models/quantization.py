"""Weight-only quantized linear layers, and the pass that puts them into a loaded model.

Owns the modes (`MODES`), how a float weight becomes each mode's stored form, the matmul
each mode runs on each device, and the checks that refuse, at load, a mode that a layer
or the device cannot run (`QuantizationError`, naming the layer or the capability).

- "int8": one int8 per weight and one scale per output channel (symmetric). On CPU the
  matmul is torch's packed int8 kernel; elsewhere the weight is widened per call.
- "int4": two weights per byte, an asymmetric scale and zero per group of `group_size`
  input columns. On CPU, torch's packed int4 kernel; elsewhere the weight is widened.
  On CPU both multiply in bfloat16 (scales included), whatever the model's dtype.
- "fp8": e4m3 weights with one scale per output channel, multiplied by
  `torch._scaled_mm` on GPUs of compute capability 8.9 and up, with each token's
  activations scaled to e4m3 on the fly; other devices are refused.
- "native": a GGUF file's 3-, 4-, 5-, 6- and 8-bit layers as stored (see
  `quantize_model`); any other layer or checkpoint stays float. On CPU they multiply in
  integers, their activations quantized to int8 per block of 32, as llama.cpp does: the
  4-bit layers (Q4_0, Q4_1, Q4_K) as `Int4BlockLinear`s, the others (Q3_K, Q5_0, Q5_1,
  Q5_K, Q6_K, Q8_0, as int8 values) as `Int8BlockLinear`s, an LM head so stored too
  (`Int8BlockHead`). On a GPU the 4-bit layers are `Int4Linear`s and the 8-bit ones
  `Int8Linear`s (requantized per row).
- None or "float": none; the weights stay in the engine's dtype.
- "auto" (the default): "native" for the embedded default model on CPU, where it decodes
  several times faster than float and the quality guard finds it within 3% of float's
  perplexity (benchmarks/results/quality.json); "float" for any other checkpoint or
  device (the engine resolves it, knowing the checkpoint).
With activations rounded to bfloat16 or int8, a last-bit difference upstream can round a
layer's input the other way: prefill attention is computed so that a prefix-cache hit
gives a cold prefill's logits exactly; logits still differ in their last float32 bits
with the other rows of their step where the LM head is float (torch's matmul; native's
int8 head is row by row).

Every linear layer of the decoder is quantized. The LM head stays float32 under int8 and
int4: torch's packed kernels return their activations' bfloat16, and logits rounded to it
(a step of 1/16 at a logit of 10) would change what sampling draws and what logprobs
report whenever the hidden state moves by a rounding. Under native on CPU it reads the
file's int8 blocks with int8 activations, whose logits stay float32 (each block's
integer sum scaled and added in float32). Norms, biases and the rotary tables stay float.
Must not read checkpoints or know more of the model than its linear layers.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn

from structgen.engine.kernels import compiled, int4_matmul, int8_matmul
from structgen.errors import StructgenError

MODES = ("int8", "int4", "fp8", "native")
FLOAT = "float"  # no quantization: the engine's dtype (a GGUF file's weights dequantized)
NATIVE = "native"  # a GGUF file's 4- and 8-bit layers as stored
AUTO = "auto"  # the default: native for the embedded model on CPU, float otherwise
DEFAULT_GROUP_SIZE = 32  # int4: input columns sharing one scale and zero
INT4_GROUP_SIZES = (32, 64, 128, 256)  # what the packed CPU kernel takes
FP8_MIN_CAPABILITY = (8, 9)
INT4_INNER_K_TILES = 2  # the CPU packing's tile width (torch's kernels take 2, 4 or 8)
FP8_MAX = 448.0  # the largest finite e4m3 value
# The packed CPU kernels are vectorized for bfloat16 activations only (float32 and float16
# take a scalar loop, 10-40x slower): a layer casts its input to it and its output back.
CPU_COMPUTE_DTYPE = torch.bfloat16
# what native runs as stored (gguf_weights decodes them)
STORED_FORMATS = "Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K or Q8_0"
log = logging.getLogger(__name__)


class QuantizationError(StructgenError):
    """A quantization the model or the device cannot run, said at load."""


class Int8Linear(nn.Module):
    """y = x @ (q * scale).T + bias, q int8 [out, in], scale [out]."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        w = weight.float()
        self.packed_kernel = weight.device.type == "cpu"
        self.compute_dtype = CPU_COMPUTE_DTYPE if self.packed_kernel else weight.dtype
        scale = held_scale((w.abs().amax(dim=1) / 127.0).clamp(min=torch.finfo(torch.float32).tiny),
                           self.compute_dtype)
        self.register_buffer("qweight", torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale.to(self.compute_dtype))
        self.bias = frozen_copy(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed_kernel:
            y = torch.ops.aten._weight_int8pack_mm(x.to(self.compute_dtype), self.qweight, self.scale).to(x.dtype)
        else:
            y = F.linear(x, self.qweight.to(x.dtype)) * self.scale
        return y if self.bias is None else y + self.bias

    def dequantized(self) -> torch.Tensor:
        return self.qweight.float() * self.scale.float()[:, None]


class Int4Linear(nn.Module):
    """Groups of `group_size` input columns share a scale and a zero point:
    w = (q - 8) * scale + zero, q in 0..15, two per byte."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bias: torch.Tensor | None,
                 dtype: torch.dtype):
        """`q` int32 [out, in], `scale` and `zero` [out, in / group size]."""
        super().__init__()
        out_features, in_features = q.shape
        self.group_size = in_features // scale.shape[1]
        # [in / group, out, 2]: the layout the packed kernels read
        scales_and_zeros = torch.stack([scale, zero], dim=-1).transpose(0, 1).contiguous()
        self.packed_kernel = q.device.type == "cpu"
        self.compute_dtype = CPU_COMPUTE_DTYPE if self.packed_kernel else dtype
        if self.packed_kernel:
            packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, INT4_INNER_K_TILES)
        else:
            packed = (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8)
        self.register_buffer("packed", packed)
        self.register_buffer("scales_and_zeros", scales_and_zeros.to(self.compute_dtype))
        self.bias = frozen_copy(bias)
        self.shape = (out_features, in_features)

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None, group_size: int) -> "Int4Linear":
        out_features, in_features = weight.shape
        groups = weight.float().reshape(out_features, in_features // group_size, group_size)
        low, high = groups.amin(dim=-1), groups.amax(dim=-1)
        held = CPU_COMPUTE_DTYPE if weight.device.type == "cpu" else weight.dtype
        scale = held_scale(((high - low) / 15.0).clamp(min=torch.finfo(torch.float32).tiny), held)
        zero = (low + 8.0 * scale).to(held).float()
        q = torch.round((groups - zero[..., None]) / scale[..., None] + 8.0).clamp(0, 15).to(torch.int32)
        return cls(q.reshape(out_features, in_features), scale, zero, bias, weight.dtype)

    @classmethod
    def from_blocks(cls, q: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor, bias: torch.Tensor | None,
                    dtype: torch.dtype) -> "Int4Linear":
        """From groups stored as w = q * scale + minimum (GGUF's 4-bit formats), as they are."""
        return cls(q.to(torch.int32), scale.float(), minimum.float() + 8.0 * scale.float(), bias, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed_kernel:
            y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.to(self.compute_dtype), self.packed, self.group_size,
                                                           self.scales_and_zeros).to(x.dtype)
        else:
            y = F.linear(x, self.dequantized().to(x.dtype))
        return y if self.bias is None else y + self.bias

    def dequantized(self) -> torch.Tensor:
        """The float weight the stored one stands for (the CPU packing is read back
        through the kernel itself, on the identity, in float32: exact)."""
        out_features, in_features = self.shape
        if self.packed_kernel:
            eye = torch.eye(in_features, dtype=torch.float32)
            return torch.ops.aten._weight_int4pack_mm_for_cpu(
                eye, self.packed, self.group_size, self.scales_and_zeros.float()).T.contiguous()
        q = torch.stack([self.packed & 0xF, self.packed >> 4], dim=-1).reshape(out_features, in_features)
        scale, zero = self.scales_and_zeros.float().transpose(0, 1).unbind(-1)  # [out, in / group] each
        q = q.float().reshape(out_features, -1, self.group_size)
        return ((q - 8.0) * scale[..., None] + zero[..., None]).reshape(out_features, in_features)


class Int4BlockLinear(nn.Module):
    """A layer a GGUF file stores in 4-bit blocks of 32 (Q4_0, Q4_1, Q4_K as decoded:
    w = q * scale + minimum), held as stored and multiplied on CPU by
    `kernels.int4_matmul`: the activations are quantized to int8 per block of 32 and the
    products summed in integers, as llama.cpp does (the quality guard measures the cost).
    A row's output is the same bits whatever else the step holds."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor, bias: torch.Tensor | None):
        """`q` [out, in] values 0..15, `scale` and `minimum` [out, in / 32]."""
        super().__init__()
        compiled.require()
        packed, scale, minimum = int4_matmul.pack(q, scale, minimum)
        int4_matmul.check_blocks(packed, scale, minimum)
        self.register_buffer("packed", packed)
        self.register_buffer("scale", scale)
        self.register_buffer("minimum", minimum)
        self.bias = frozen_copy(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = int4_matmul.matmul(x.reshape(-1, x.shape[-1]), self.packed, self.scale, self.minimum)
        y = y.view(*x.shape[:-1], y.shape[-1]).to(x.dtype)
        return y if self.bias is None else y + self.bias

    def dequantized(self) -> torch.Tensor:
        q = int4_matmul.unpack(self.packed).float()
        rows, cols = q.shape
        scale, minimum = int4_matmul.per_row(self.scale), int4_matmul.per_row(self.minimum)
        return (q.reshape(rows, -1, int4_matmul.BLOCK) * scale[..., None] + minimum[..., None]).reshape(rows, cols)


class Int8BlockLinear(nn.Module):
    """A layer a GGUF file stores in blocks of 3 to 8 bits: Q8_0 and Q5_0 (a scale per 32
    weights), Q6_K and Q3_K (a scale per 16), Q5_1 and Q5_K (a scale and a minimum per
    32), decoded to int8 values (w = q * scale, + minimum), held in
    `kernels.int8_matmul`'s layout and multiplied on CPU by its kernel: the activations
    are quantized to int8 per block of 32 and the products summed in integers, as llama.cpp
    does (the quality guard measures the cost). A row's output is the same bits whatever
    else the step holds."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None,
                 minimum: torch.Tensor | None = None):
        """`q` int8 [out, in], `scale` [out, in / 32] or [out, in / 16], and `minimum`
        [out, in / 32] or None, as the file holds them."""
        super().__init__()
        compiled.require()
        self.rows = q.shape[0]
        packed, scale = int8_matmul.pack(q, scale)
        if minimum is not None:
            minimum = int8_matmul.pack_per_block(minimum)
        int8_matmul.check_blocks(packed, scale, self.rows, minimum)
        self.register_buffer("packed", packed)
        self.register_buffer("scale", scale)
        self.register_buffer("minimum", minimum)  # (None: a buffer that is not there)
        self.bias = frozen_copy(bias)

    @classmethod
    def of_blocks(cls, blocks, bias: torch.Tensor | None = None):
        """The layer of stored `gguf_weights.Int8Blocks` (q, scale, minimum or None)."""
        minimum = None if blocks.minimum is None else torch.from_numpy(blocks.minimum)
        return cls(torch.from_numpy(blocks.q), torch.from_numpy(blocks.scale), bias, minimum=minimum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = int8_matmul.matmul(x.reshape(-1, x.shape[-1]), self.packed, self.scale, self.rows,
                               minimums=self.minimum)
        y = y.view(*x.shape[:-1], y.shape[-1]).to(x.dtype)
        return y if self.bias is None else y + self.bias

    def dequantized(self) -> torch.Tensor:
        return int8_matmul.lookup(self.packed, self.scale, torch.arange(self.rows), self.minimum)


class Int8BlockHead(Int8BlockLinear):
    """The LM head as a GGUF file stores it in 8-bit blocks (`Int8BlockLinear`, with its
    scales as stored); its logits stay float32. It can also give rows of its weights, for
    a tied model's embedding table."""

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows `ids` of the weights in float32, exactly as the file's blocks give them."""
        return int8_matmul.lookup(self.packed, self.scale, ids, self.minimum)


class Int8BlockEmbedding(nn.Module):
    """A tied model's embedding table read from the same int8 blocks as its
    `Int8BlockHead`, so the float table need not be held (113 MB for the embedded
    model): each looked-up row is dequantized, which gives the float table's row exactly
    (one float32 product per weight, as GGUF's own dequantization)."""

    def __init__(self, head: Int8BlockHead):
        super().__init__()
        self.lookup = head.lookup  # the head's blocks, shared, not copied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lookup(ids)


class Fp8Linear(nn.Module):
    """e4m3 weights with a scale per output channel, through `torch._scaled_mm`."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        w = weight.float()
        scale = (w.abs().amax(dim=1) / FP8_MAX).clamp(min=torch.finfo(torch.float32).tiny)
        self.register_buffer("qweight", (w / scale[:, None]).to(torch.float8_e4m3fn))
        self.register_buffer("scale", scale[None, :].contiguous())  # [1, out], float32
        self.bias = frozen_copy(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_scale = (x.abs().amax(dim=1, keepdim=True).float() / FP8_MAX).clamp(min=1e-12)  # per token
        x_fp8 = (x / x_scale).to(torch.float8_e4m3fn)
        return torch._scaled_mm(x_fp8, self.qweight.t(), scale_a=x_scale, scale_b=self.scale, bias=self.bias,
                                out_dtype=x.dtype)

    def dequantized(self) -> torch.Tensor:
        return self.qweight.float() * self.scale.T


def frozen_copy(bias: torch.Tensor | None) -> nn.Parameter | None:
    """A layer's bias, kept float beside its quantized weight."""
    return None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)


def held_scale(scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`scale` as the layer will hold it in `dtype`, rounded up so that the largest weight
    still fits (float32 values); the weights are then rounded against this one."""
    if dtype == torch.float32:
        return scale
    return (scale * (1.0 + 2.0 * torch.finfo(dtype).eps)).to(dtype).float()  # eps: the dtype's relative step


def check_mode(mode: str | None, group_size: int = DEFAULT_GROUP_SIZE) -> None:
    """Refuse an unknown mode or group size before anything is loaded."""
    if mode is not None and mode not in (FLOAT, AUTO) and mode not in MODES:
        raise QuantizationError(f"unknown quantization {mode!r}; use one of {', '.join(MODES)}, {FLOAT} "
                                f"(the engine's dtype, as None) or {AUTO} (native for the embedded model on "
                                "CPU, float otherwise)")
    if mode == "int4" and group_size not in INT4_GROUP_SIZES:
        raise QuantizationError(f"int4 group size must be one of {', '.join(map(str, INT4_GROUP_SIZES))}, "
                                f"got {group_size!r}")


def check_device(mode: str, device: torch.device) -> None:
    """Refuse a mode the device cannot run, naming what it lacks."""
    if mode != "fp8":
        return
    if device.type != "cuda":
        raise QuantizationError(f"fp8 weights need a GPU of compute capability "
                                f"{'.'.join(map(str, FP8_MIN_CAPABILITY))} or newer; this engine runs on {device}")
    check_fp8_device(device, "fp8 weights")


def check_fp8_device(device: torch.device, what: str = "an fp8 KV cache") -> None:
    """Refuse fp8 on a GPU older than FP8_MIN_CAPABILITY, naming its capability."""
    capability = torch.cuda.get_device_capability(device)
    if capability < FP8_MIN_CAPABILITY:
        raise QuantizationError(f"{what}: compute capability {'.'.join(map(str, FP8_MIN_CAPABILITY))} or newer "
                                f"is needed; {torch.cuda.get_device_name(device)} has "
                                f"{'.'.join(map(str, capability))}")


def quantized_linear(layer_name: str, weight: torch.Tensor, bias: torch.Tensor | None, mode: str,
                     group_size: int = DEFAULT_GROUP_SIZE) -> nn.Module:
    """One layer's quantized replacement; a shape the mode cannot take is refused by name."""
    out_features, in_features = weight.shape
    if mode == "int8":
        return Int8Linear(weight, bias)
    if mode == "int4":
        if in_features % group_size:
            raise QuantizationError(f"int4 group size {group_size} does not divide the {in_features} input "
                                    f"columns of {layer_name}")
        if out_features % 16:
            raise QuantizationError(f"int4 needs a multiple of 16 output rows; {layer_name} has {out_features}")
        return Int4Linear.from_float(weight, bias, group_size)
    if mode == "fp8":
        if in_features % 16 or out_features % 16:
            raise QuantizationError(f"fp8 needs layer sides that are multiples of 16; {layer_name} is "
                                    f"{out_features}x{in_features}")
        return Fp8Linear(weight, bias)
    raise QuantizationError(f"unknown quantization {mode!r}")


def quantize_model(model: nn.Module, mode: str | None, group_size: int = DEFAULT_GROUP_SIZE,
                   stored: dict | None = None) -> None:
    """Replace, in place, every decoder linear layer with `mode`'s (the LM head stays,
    but for native's on CPU).

    `stored`: layers as a quantized checkpoint holds them, by layer name
    (`gguf_weights.stored_linears`). A 4-bit one becomes an `Int4BlockLinear`
    as it is when the mode is native on CPU (and its rows a multiple of 8), an
    `Int4Linear` when it is native otherwise or int4 at its group size; an 8-bit one an
    `Int8BlockLinear` when the mode is native on CPU, an `Int8Linear` when it is native
    otherwise; an 8-bit head ("lm_head") an `Int8BlockHead` when the mode is native and
    the model is on CPU (with tied embeddings, the table is then looked up in the same
    blocks). Native leaves the layers `stored` lacks float."""
    check_mode(mode, group_size)
    if mode == AUTO:
        raise QuantizationError(f"{AUTO!r} is resolved by the engine, which knows the checkpoint; "
                                "pass a mode")
    if mode in (None, FLOAT) or (mode == NATIVE and not stored):
        return
    if mode != NATIVE:
        check_device(mode, model.embed.weight.device)
    stored = stored or {}
    left_float = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and full != "lm_head":
                layer = _layer(full, child.weight, child.bias, mode, group_size, stored.get(full))
                if layer is None:
                    left_float.append(full)
                else:
                    setattr(module, child_name, layer)
    if left_float:
        log.warning("native quantization: %d decoder linear layers (%s%s) are stored in a format other than %s "
                    "and run dequantized to float", len(left_float), left_float[0],
                    f" and {len(left_float) - 1} more" if len(left_float) > 1 else "", STORED_FORMATS)
    head = stored.get("lm_head")
    if mode == NATIVE and _int8_blocks(head) and model.embed.weight.device.type == "cpu":
        tied = model.lm_head is None
        model.lm_head = Int8BlockHead.of_blocks(head)
        if tied:
            model.embed = Int8BlockEmbedding(model.lm_head)


def _int8_blocks(blocks) -> bool:
    """Whether stored blocks are int8 values (`gguf_weights.Int8Blocks`)."""
    return blocks is not None and getattr(blocks, "bits", None) == 8


class SplitLinear(nn.Module):
    """A fused layer whose runs of rows a file stores in different forms (4-bit q and k
    beside an 8-bit v), each run its own block layer; the outputs side by side (the
    one-call step runs each part into its own columns the same way)."""

    def __init__(self, parts: list[nn.Module], bias: torch.Tensor | None):
        super().__init__()
        self.parts = nn.ModuleList(parts)
        self.bias = frozen_copy(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([part(x) for part in self.parts], dim=-1)
        return y if self.bias is None else y + self.bias

    def dequantized(self) -> torch.Tensor:
        return torch.cat([part.dequantized() for part in self.parts])


def _cpu_block_layer(blocks, bias: torch.Tensor | None, rows: int, cols: int) -> nn.Module | None:
    """Native on CPU: the block layer that holds `blocks` as stored, or None where the
    int4 kernel cannot take the shape."""
    if hasattr(blocks, "parts"):
        parts = [_cpu_block_layer(part, None, part.q.shape[0], cols) for part in blocks.parts]
        return None if None in parts else SplitLinear(parts, bias)
    if _int8_blocks(blocks):
        return Int8BlockLinear.of_blocks(blocks, bias)
    if int4_matmul.fits_shape(rows, cols):
        return Int4BlockLinear(*(torch.from_numpy(getattr(blocks, f)) for f in ("q", "scale", "minimum")), bias)
    return None


def _layer(name: str, weight: torch.Tensor, bias: torch.Tensor | None, mode: str | None, group_size: int,
           blocks) -> nn.Module | None:
    """The layer that replaces `name`, built from its stored blocks where they serve the
    mode; None: keep the float layer (native, nothing stored that serves)."""
    if blocks is not None and mode == NATIVE and weight.device.type == "cpu":
        layer = _cpu_block_layer(blocks, bias, *weight.shape)
        if layer is not None:
            return layer
    if hasattr(blocks, "parts"):  # (native off CPU, or int4: float, or quantized from it)
        blocks = None
    four_bit = blocks is not None and not _int8_blocks(blocks)
    if four_bit and (mode == NATIVE or (mode == "int4" and group_size == blocks.q.shape[1] // blocks.scale.shape[1])):
        return Int4Linear.from_blocks(*(torch.from_numpy(getattr(blocks, f)).to(weight.device)
                                        for f in ("q", "scale", "minimum")), bias, weight.dtype)
    if _int8_blocks(blocks) and mode == NATIVE:
        return Int8Linear(weight, bias)  # GGUF's per-block scales, requantized to one per row
    if mode == NATIVE:
        return None
    return quantized_linear(name, weight, bias, mode, group_size)
