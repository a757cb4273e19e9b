"""GGUF weight tensors read as they are stored, for the quantized linear layers.

Owns the decoding of GGUF's block formats into the arrays `quantization` builds layers
from, and the map from GGUF tensor names to the model's linear layers:
- Q4_0, Q4_1 and Q4_K: 4-bit values in groups of 32 with a scale and a minimum each
  (`Int4Blocks`, w = q * scale + minimum): an int4 layer of group size 32 takes them as
  they are, with no float round trip and no second rounding;
- Q8_0: 8-bit values in groups of 32 with a scale each (`Int8Blocks`, w = q * scale);
- any other format (Q6_K, Q5_K, F16, ...): dequantized to float32 by `gguf`.
The LM head is stored as `output.weight`, or, in a model with tied embeddings, is the
embedding table `token_embd.weight`; it is read as the layer "lm_head".
Every decode reproduces `gguf`'s own dequantization bit for bit. Q and K projections
are stored by GGUF with their rows permuted for its rotary layout; `unpermute_rows`
undoes it as the Hugging Face conversion does. Reading the file's header costs seconds
(its tokenizer metadata is parsed in Python); the caller reads it once per load. Must
not build layers or touch the model.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GROUP = 32  # weights per scale in every format decoded here
INT4_FORMATS = ("Q4_0", "Q4_1", "Q4_K")
# GGUF name (after "blk.N.") -> the model's linear layer and the slice of it (fused q/k/v, gate/up)
LINEAR_NAMES = {
    "attn_q.weight": ("attn.qkv", 0), "attn_k.weight": ("attn.qkv", 1), "attn_v.weight": ("attn.qkv", 2),
    "attn_output.weight": ("attn.o", None),
    "ffn_gate.weight": ("mlp.gate_up", 0), "ffn_up.weight": ("mlp.gate_up", 1),
    "ffn_down.weight": ("mlp.down", None),
}
HEAD = "lm_head"  # the model's name for the LM head
_BLOCK_RE = re.compile(r"blk\.(\d+)\.(.+)")


@dataclass
class Int4Blocks:
    q: np.ndarray  # uint8 [rows, cols], values 0..15
    scale: np.ndarray  # float32 [rows, cols / GROUP]
    minimum: np.ndarray  # float32 [rows, cols / GROUP]; w = q * scale + minimum

    def dequantize(self) -> np.ndarray:
        rows, cols = self.q.shape
        q = self.q.reshape(rows, -1, GROUP).astype(np.float32)
        return (q * self.scale[..., None] + self.minimum[..., None]).reshape(rows, cols)

    def take_rows(self, order: np.ndarray) -> "Int4Blocks":
        return Int4Blocks(self.q[order], self.scale[order], self.minimum[order])


@dataclass
class Int8Blocks:
    q: np.ndarray  # int8 [rows, cols]
    scale: np.ndarray  # float32 [rows, cols / GROUP]; w = q * scale

    def dequantize(self) -> np.ndarray:
        rows, cols = self.q.shape
        return (self.q.reshape(rows, -1, GROUP).astype(np.float32) * self.scale[..., None]).reshape(rows, cols)

    def take_rows(self, order: np.ndarray) -> "Int8Blocks":
        return Int8Blocks(self.q[order], self.scale[order])


@dataclass
class GGUFTensor:
    name: str
    format: str  # the GGML type's name: "Q4_1", "Q8_0", "F32", ...
    rows: int  # output features (GGUF lists the shape the other way round)
    cols: int
    data: np.ndarray  # the stored bytes, [rows, bytes per row] (float formats: the values)

    def decoded(self) -> Int4Blocks | Int8Blocks | np.ndarray:
        """The tensor in the form a layer takes: Int4Blocks, Int8Blocks, or float32."""
        if self.format in INT4_FORMATS:
            return DECODERS[self.format](self.data.reshape(self.rows, -1))
        if self.format == "Q8_0":
            return decode_q8_0(self.data.reshape(self.rows, -1))
        return self.dequantize()

    def dequantize(self) -> np.ndarray:
        from gguf import GGMLQuantizationType, quants

        kind = GGMLQuantizationType[self.format]
        return quants.dequantize(self.data, kind).astype(np.float32).reshape(self.rows, self.cols)


def read_tensors(path: Path) -> dict[str, GGUFTensor]:
    """Every tensor of the file, by GGUF name (memory-mapped: nothing is copied yet)."""
    from gguf import GGUFReader

    tensors = {}
    for tensor in GGUFReader(str(path)).tensors:
        shape = [int(n) for n in tensor.shape]
        cols, rows = (shape + [1])[:2]
        tensors[tensor.name] = GGUFTensor(tensor.name, tensor.tensor_type.name, rows, cols, tensor.data)
    return tensors


def linear_target(gguf_name: str, tied: bool = False) -> tuple[str, int | None] | None:
    """The model's linear layer ("layers.3.attn.qkv") and fused slice a GGUF tensor fills.
    `tied`: the file has no `output.weight`, so the embedding table is the head too."""
    if gguf_name == "output.weight" or (tied and gguf_name == "token_embd.weight"):
        return HEAD, None
    match = _BLOCK_RE.fullmatch(gguf_name)
    if not match or match.group(2) not in LINEAR_NAMES:
        return None
    layer, part = LINEAR_NAMES[match.group(2)]
    return f"layers.{match.group(1)}.{layer}", part


def unpermute_rows(rows: int, heads: int) -> np.ndarray:
    """The row order that undoes GGUF's rotary permutation of a Q or K projection of
    `heads` heads: within each head, GGUF interleaves the two halves of the rows."""
    half = rows // heads // 2
    return np.arange(rows).reshape(heads, half, 2).swapaxes(1, 2).reshape(rows)


def _f16(column_bytes: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(column_bytes).view(np.float16).astype(np.float32)[..., 0]


def _nibbles(packed: np.ndarray) -> np.ndarray:
    """[..., 16] bytes -> [..., 32] values: the low nibbles first, then the high ones."""
    return np.concatenate([packed & 0x0F, packed >> 4], axis=-1)


def decode_q4_0(data: np.ndarray) -> Int4Blocks:
    """Blocks of 18 bytes: scale d (f16), 16 bytes of nibbles; w = (q - 8) * d."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 18)
    scale = _f16(blocks[..., 0:2])
    return Int4Blocks(_nibbles(blocks[..., 2:]).reshape(rows, -1), scale, -8.0 * scale)


def decode_q4_1(data: np.ndarray) -> Int4Blocks:
    """Blocks of 20 bytes: scale d and minimum m (f16), 16 bytes of nibbles; w = q * d + m."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 20)
    return Int4Blocks(_nibbles(blocks[..., 4:]).reshape(rows, -1), _f16(blocks[..., 0:2]), _f16(blocks[..., 2:4]))


def decode_q4_k(data: np.ndarray) -> Int4Blocks:
    """Super-blocks of 256 weights in 144 bytes: d and dmin (f16), twelve bytes holding
    eight 6-bit scales and minimums, and 128 bytes of nibbles, where each 32 bytes hold two
    groups (low nibbles, then high). w = q * (d * scale_j) - dmin * minimum_j."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 144)
    d, dmin = _f16(blocks[..., 0:2]), _f16(blocks[..., 2:4])
    packed = blocks[..., 4:16].reshape(rows, -1, 3, 4)
    low, high, both = packed[..., 0, :], packed[..., 1, :], packed[..., 2, :]
    scales = np.concatenate([low & 0x3F, (both & 0x0F) | ((low >> 2) & 0x30)], axis=-1).astype(np.float32)
    minimums = np.concatenate([high & 0x3F, (both >> 4) | ((high >> 2) & 0x30)], axis=-1).astype(np.float32)
    return Int4Blocks(_q4_k_values(blocks[..., 16:], rows), (d[..., None] * scales).reshape(rows, -1), -(dmin[..., None] * minimums).reshape(rows, -1))


def _q4_k_values(nibble_bytes: np.ndarray, rows: int) -> np.ndarray:
    """[rows, super-blocks, 128] bytes -> [rows, cols] values: each 32 bytes give a group
    of 32 from their low nibbles, then the next group from their high nibbles."""
    chunks = nibble_bytes.reshape(rows, -1, 4, 1, 32)
    return ((chunks >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 1, 2, 1)) & 0x0F).reshape(rows, -1)


def decode_q8_0(data: np.ndarray) -> Int8Blocks:
    """Blocks of 34 bytes: scale d (f16), 32 int8 values; w = q * d."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 34)
    return Int8Blocks(np.ascontiguousarray(blocks[..., 2:]).view(np.int8).reshape(rows, -1), _f16(blocks[..., 0:2]))


DECODERS = {"Q4_0": decode_q4_0, "Q4_1": decode_q4_1, "Q4_K": decode_q4_k}


StoredLinear = Int4Blocks | Int8Blocks


def stored_linears(path: Path, num_heads: int, num_kv_heads: int, cache: Path | None = None
                   ) -> dict[str, StoredLinear]:
    """The decoder's linear layers and the LM head as the file stores them: fused (q/k/v,
    gate/up), in the model's row order, by layer name ("layers.3.attn.qkv", "lm_head").
    A layer with a part in another format (a float, Q6_K, ...) is left out: it loads as
    float.
    `cache`: a safetensors file that holds the result after the first read."""
    if cache is not None and cache.is_file():
        return _load_cached(cache)
    parts: dict[str, dict] = {}
    tensors = read_tensors(path)
    tied = "output.weight" not in tensors
    for name, tensor in tensors.items():
        target = linear_target(name, tied)
        if target is None:
            continue
        decoded = tensor.decoded() if tensor.format in (*INT4_FORMATS, "Q8_0") else None
        heads = {"attn_q.weight": num_heads, "attn_k.weight": num_kv_heads}.get(name.split(".", 2)[-1])
        if decoded is not None and heads:
            decoded = decoded.take_rows(unpermute_rows(tensor.rows, heads))
        parts.setdefault(target[0], {})[target[1]] = decoded
    stored = {layer: fused for layer, pieces in parts.items() if (fused := _fuse(pieces)) is not None}
    if cache is not None:
        _save_cached(stored, cache)
    return stored


def _fuse(pieces: dict) -> StoredLinear | None:
    """One layer from its parts in order, or None unless every part has the same form."""
    ordered = [pieces[key] for key in sorted(pieces, key=lambda k: -1 if k is None else k)]
    kinds = {type(piece) for piece in ordered}
    if len(kinds) != 1 or kinds == {type(None)}:
        return None
    if kinds == {Int4Blocks}:
        return Int4Blocks(*(np.concatenate([getattr(p, f) for p in ordered]) for f in ("q", "scale", "minimum")))
    return Int8Blocks(*(np.concatenate([getattr(p, f) for p in ordered]) for f in ("q", "scale")))


def _save_cached(stored: dict[str, StoredLinear], cache: Path) -> None:
    from safetensors.numpy import save_file

    arrays = {f"{layer}.{field}": np.ascontiguousarray(getattr(blocks, field))
              for layer, blocks in stored.items() for field in blocks.__dataclass_fields__}
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_name(f"{cache.name}.{os.getpid()}.partial")  # processes filling it at once
    save_file(arrays, str(partial))
    partial.replace(cache)


def _load_cached(cache: Path) -> dict[str, StoredLinear]:
    from safetensors.numpy import load_file

    arrays = load_file(str(cache))
    layers: dict[str, dict] = {}
    for key, array in arrays.items():
        layer, field = key.rsplit(".", 1)
        layers.setdefault(layer, {})[field] = array
    return {layer: Int4Blocks(**fields) if "minimum" in fields else Int8Blocks(**fields)
            for layer, fields in layers.items()}
