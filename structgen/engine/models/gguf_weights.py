"""GGUF weight tensors read as they are stored, for the quantized linear layers.

Owns the decoding of GGUF's block formats into the arrays `quantization` builds layers
from, and the map from GGUF tensor names to the model's linear layers:
- Q4_0, Q4_1 and Q4_K: 4-bit values in groups of 32 with a scale and a minimum each
  (`Int4Blocks`, w = q * scale + minimum): an int4 layer of group size 32 takes them as
  they are, with no float round trip and no second rounding;
- Q8_0 and Q5_0: 8- and 5-bit values in groups of 32 with a scale each, and Q6_K and
  Q3_K: 6- and 3-bit values with a scale per group of 16 (`Int8Blocks`, w = q * scale,
  q an int8: the unsigned values less their offsets);
- Q5_1 and Q5_K: 5-bit values in groups of 32 with a scale and a minimum each
  (`Int8Blocks` with minimums, w = q * scale + minimum);
- any other format (Q2_K, F16, ...): dequantized to float32 by `gguf`.
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

GROUP = 32  # weights per scale in the 4- and 5-bit formats and Q8_0
HALF_GROUP = 16  # weights per scale in Q6_K and Q3_K
QK_K = 256  # weights per super-block of the K formats
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
    bits = 4
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
    bits = 8
    q: np.ndarray  # int8 [rows, cols]
    scale: np.ndarray  # float32 [rows, cols / GROUP] or [rows, cols / HALF_GROUP]
    minimum: np.ndarray | None = None  # float32 [rows, cols / GROUP]; w = q * scale (+ minimum)

    def dequantize(self) -> np.ndarray:
        rows, cols = self.q.shape
        parts = self.scale.shape[1]
        scaled = (self.q.reshape(rows, parts, -1).astype(np.float32) * self.scale[..., None]).reshape(rows, -1, GROUP)
        if self.minimum is not None:
            scaled = scaled + self.minimum[..., None]
        return scaled.reshape(rows, cols)

    def per_half_group(self) -> "Int8Blocks":
        """The same weights with a scale per 16 (each scale of a group of 32 given twice)."""
        if self.scale.shape[1] * HALF_GROUP == self.q.shape[1]:
            return self
        return Int8Blocks(self.q, np.repeat(self.scale, GROUP // HALF_GROUP, axis=1), self.minimum)

    def with_minimum(self) -> "Int8Blocks":
        """The same weights with a minimum per group (zeros where it had none)."""
        if self.minimum is not None:
            return self
        return Int8Blocks(self.q, self.scale, np.zeros((self.q.shape[0], self.q.shape[1] // GROUP), np.float32))

    def take_rows(self, order: np.ndarray) -> "Int8Blocks":
        return Int8Blocks(self.q[order], self.scale[order], None if self.minimum is None else self.minimum[order])


@dataclass
class GGUFTensor:
    name: str
    format: str  # the GGML type's name: "Q4_1", "Q8_0", "F32", ...
    rows: int  # output features (GGUF lists the shape the other way round)
    cols: int
    data: np.ndarray  # the stored bytes, [rows, bytes per row] (float formats: the values)

    def decoded(self) -> Int4Blocks | Int8Blocks | np.ndarray:
        """The tensor in the form a layer takes: Int4Blocks, Int8Blocks, or float32."""
        if self.format in DECODERS:
            return DECODERS[self.format](self.data.reshape(self.rows, -1))
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


def decode_q5_0(data: np.ndarray) -> Int8Blocks:
    """Blocks of 22 bytes: scale d (f16), 32 high bits (one per value, little-endian), 16
    bytes of nibbles (low ones first, as Q4_0); w = (q - 16) * d, q = nibble + 16 * bit."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 22)
    q = _five_bits(blocks[..., 2:6], blocks[..., 6:]) - np.int8(16)
    return Int8Blocks(q.reshape(rows, -1), _f16(blocks[..., 0:2]))


def decode_q5_1(data: np.ndarray) -> Int8Blocks:
    """Blocks of 24 bytes: scale d and minimum m (f16), 32 high bits, 16 bytes of nibbles
    (as Q5_0); w = q * d + m, q = nibble + 16 * bit in 0..31."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 24)
    return Int8Blocks(_five_bits(blocks[..., 4:8], blocks[..., 8:]).reshape(rows, -1), _f16(blocks[..., 0:2]),
                      _f16(blocks[..., 2:4]))


def _five_bits(high_bytes: np.ndarray, nibble_bytes: np.ndarray) -> np.ndarray:
    """Q5_0's and Q5_1's values 0..31 as int8 [..., 32]: the nibbles (low ones first),
    and bit i of the little-endian word of `high_bytes` as value i's fifth bit."""
    high = np.ascontiguousarray(high_bytes).view("<u4")  # [rows, blocks, 1]
    bits = ((high >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)
    return (_nibbles(nibble_bytes) | (bits << 4)).astype(np.int8)


def decode_q5_k(data: np.ndarray) -> Int8Blocks:
    """Super-blocks of 256 weights in 176 bytes: d and dmin (f16), Q4_K's twelve bytes of
    6-bit scales and minimums, 32 bytes of fifth bits (value i of group j: bit j of byte
    i), and Q4_K's 128 bytes of nibbles. w = q * (d * scale_j) - dmin * minimum_j."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 176)
    as_q4_k = decode_q4_k(np.concatenate([blocks[..., :16], blocks[..., 48:]], axis=-1).reshape(rows, -1))
    high = blocks[..., 16:48].reshape(rows, -1, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(8, 1)
    q = as_q4_k.q | ((high & 1).reshape(rows, -1) << 4)
    return Int8Blocks(q.astype(np.int8), as_q4_k.scale, as_q4_k.minimum)


def decode_q3_k(data: np.ndarray) -> Int8Blocks:
    """Super-blocks of 256 weights in 110 bytes: 32 bytes of high bits (value i of group
    j: bit j of byte i), 64 bytes of 2-bit values (each 32 bytes hold four groups, bit
    pairs 0-1, 2-3, 4-5, 6-7 in turn), twelve bytes of sixteen 6-bit scales (low nibbles
    in the first eight, high bit pairs in the last four), and d (f16).
    w = (low - 4 * (1 - high)) * (d * (scale_j - 32)), one scale per 16 weights."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 110)
    supers = blocks.shape[1]
    high = blocks[..., :32].reshape(rows, supers, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(8, 1)
    low = blocks[..., 32:96].reshape(rows, supers, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(4, 1)
    low = (low & 0x03).reshape(rows, supers, 8, 32).astype(np.int8)
    q = low - (((high & 1) ^ 1) << 2).astype(np.int8)
    packed = blocks[..., 96:108]
    scale_low = packed[..., :8].reshape(rows, supers, 1, 8) >> np.array([0, 4], dtype=np.uint8).reshape(2, 1)
    scale_high = packed[..., 8:].reshape(rows, supers, 1, 4) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(4, 1)
    scales = (scale_low & 0x0F).reshape(rows, supers, 16) | ((scale_high & 0x03).reshape(rows, supers, 16) << 4)
    scales = scales.astype(np.int8) - np.int8(32)
    d = _f16(blocks[..., 108:110])
    return Int8Blocks(q.reshape(rows, -1), (d[..., None] * scales.astype(np.float32)).reshape(rows, -1))


def decode_q6_k(data: np.ndarray) -> Int8Blocks:
    """Super-blocks of 256 weights in 210 bytes: 128 bytes of low nibbles, 64 bytes of high
    bit pairs, sixteen int8 scales, and d (f16). Each half of 128 weights takes 64 low
    bytes (their low nibbles, then their high ones) and 32 high bytes (bit pairs 0-1, 2-3,
    4-5, 6-7 in turn); w = (q - 32) * (d * scale_j), one scale per 16 weights."""
    rows = data.shape[0]
    blocks = data.reshape(rows, -1, 210)
    supers = blocks.shape[1]
    low = blocks[..., :128].reshape(rows, supers, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(2, 1)
    low = (low & 0x0F).reshape(rows, supers, 8, 32)
    high = blocks[..., 128:192].reshape(rows, supers, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(4, 1)
    high = (high & 0x03).reshape(rows, supers, 8, 32)
    q = (low | (high << 4)).astype(np.int8) - np.int8(32)
    scales = np.ascontiguousarray(blocks[..., 192:208]).view(np.int8).astype(np.float32)
    return Int8Blocks(q.reshape(rows, -1), (_f16(blocks[..., 208:210])[..., None] * scales).reshape(rows, -1))


DECODERS = {"Q4_0": decode_q4_0, "Q4_1": decode_q4_1, "Q4_K": decode_q4_k, "Q8_0": decode_q8_0,
            "Q5_0": decode_q5_0, "Q5_1": decode_q5_1, "Q5_K": decode_q5_k, "Q3_K": decode_q3_k,
            "Q6_K": decode_q6_k}


@dataclass
class SplitBlocks:
    """A fused layer whose parts a file stores some in 4 bits and some in 8 (Q4_K q and k
    beside a Q6_K v in a Q4_K_M file): its runs of rows, in order, each as stored."""

    parts: list  # of Int4Blocks | Int8Blocks, each a run of consecutive parts of one form

    def dequantize(self) -> np.ndarray:
        return np.concatenate([part.dequantize() for part in self.parts])


StoredLinear = Int4Blocks | Int8Blocks | SplitBlocks


def stored_linears(path: Path, num_heads: int, num_kv_heads: int, cache: Path | None = None
                   ) -> dict[str, StoredLinear]:
    """The decoder's linear layers and the LM head as the file stores them: fused (q/k/v,
    gate/up), in the model's row order, by layer name ("layers.3.attn.qkv", "lm_head").
    A layer with 4-bit and 8-bit parts is a SplitBlocks; one with a part in another
    format (a float, Q2_K, ...) is left out: it loads as float.
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
        decoded = tensor.decoded() if tensor.format in DECODERS else None
        heads = {"attn_q.weight": num_heads, "attn_k.weight": num_kv_heads}.get(name.split(".", 2)[-1])
        if decoded is not None and heads:
            decoded = decoded.take_rows(unpermute_rows(tensor.rows, heads))
        parts.setdefault(target[0], {})[target[1]] = decoded
    stored = {layer: fused for layer, pieces in parts.items() if (fused := _fuse(pieces)) is not None}
    if cache is not None:
        _save_cached(stored, cache)
    return stored


def _fuse(pieces: dict) -> StoredLinear | None:
    """One layer from its parts in order: one form where they share it, a SplitBlocks of
    runs of one form where they are 4- and 8-bit, None where a part has no stored form."""
    ordered = [pieces[key] for key in sorted(pieces, key=lambda k: -1 if k is None else k)]
    kinds = {type(piece) for piece in ordered}
    if type(None) in kinds:
        return None
    if len(kinds) > 1:
        runs = [[ordered[0]]]
        for piece in ordered[1:]:
            if type(piece) is type(runs[-1][0]):
                runs[-1].append(piece)
            else:
                runs.append([piece])
        return SplitBlocks([_fuse(dict(enumerate(run))) for run in runs])
    if kinds == {Int4Blocks}:
        return Int4Blocks(*(np.concatenate([getattr(p, f) for p in ordered]) for f in ("q", "scale", "minimum")))
    if len({p.scale.shape[1] / p.q.shape[1] for p in ordered}) > 1:  # Q6_K beside Q8_0 or Q5_0 parts
        ordered = [p.per_half_group() for p in ordered]
    if any(p.minimum is not None for p in ordered):  # Q5_K beside Q6_K parts
        ordered = [p.with_minimum() for p in ordered]
    fields = ("q", "scale") if ordered[0].minimum is None else ("q", "scale", "minimum")
    return Int8Blocks(*(np.concatenate([getattr(p, f) for p in ordered]) for f in fields))


def _save_cached(stored: dict[str, StoredLinear], cache: Path) -> None:
    from safetensors.numpy import save_file

    arrays = {f"{name}.{field}": np.ascontiguousarray(getattr(blocks, field))
              for layer, whole in stored.items() for name, blocks in _named_parts(layer, whole)
              for field in blocks.__dataclass_fields__ if getattr(blocks, field) is not None}
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
    stored: dict = {}
    for name, fields in sorted(layers.items()):
        blocks = Int8Blocks(**fields) if fields["q"].dtype == np.int8 else Int4Blocks(**fields)
        layer, _, part = name.partition(_PART)
        if part:
            stored.setdefault(layer, SplitBlocks([])).parts.append(blocks)  # (sorted: parts in order)
        else:
            stored[layer] = blocks
    return stored


_PART = ".part"  # a SplitBlocks' part i is cached as "<layer>.part<i>"; i < 10, so sorted names keep the order


def _named_parts(layer: str, blocks: StoredLinear) -> list[tuple[str, Int4Blocks | Int8Blocks]]:
    if isinstance(blocks, SplitBlocks):
        return [(f"{layer}{_PART}{i}", part) for i, part in enumerate(blocks.parts)]
    return [(layer, blocks)]
