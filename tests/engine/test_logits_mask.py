"""Token bitmask application (structgen.engine.kernels.logits_mask).

The reference decides each token with Python ints straight from the layout (bit
id & 31 of word id >> 5; ids past the bitmask are disallowed). The torch version is
held to it; the Triton kernel, interpreted on CPU (`TRITON_INTERPRET=1`), is held to
the torch version bit for bit. As in test_attention_kernels, the interpreter must be
on before Triton decorates the kernel, so `test_triton_kernel_interpreted` reruns
`TestTritonInterpreted` in a fresh pytest process with the variable set.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import warnings
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.engine.kernels import logits_mask
from structgen.engine.kernels.logits_mask import (
    apply_token_bitmask,
    apply_token_bitmask_torch,
)
from tests.engine.interpreted import assert_passes_interpreted

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
HAS_TRITON = importlib.util.find_spec("triton") is not None
# The Triton tests run compiled on a GPU, and interpreted on CPU where there is none.
KERNEL_DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETED else "cpu"


@dataclass
class Case:
    logits: torch.Tensor  # [B, V]
    bitmask: torch.Tensor  # [R, W] int32
    rows: torch.Tensor | None  # [R] int64


def make_case(
    *,
    batch: int,
    vocab: int,
    words: int,
    rows: list[int] | None = None,
    dtype: torch.dtype = torch.float32,
    zero_rows: tuple[int, ...] = (),  # bitmask rows that allow nothing
    seed: int = 0,
) -> Case:
    gen = torch.Generator().manual_seed(seed)
    num_mask_rows = batch if rows is None else len(rows)
    bitmask = torch.randint(-2**31, 2**31, (num_mask_rows, words), generator=gen, dtype=torch.int64)
    bitmask = bitmask.to(torch.int32)
    bitmask[list(zero_rows)] = 0
    logits = (torch.randn(batch, vocab, generator=gen) * 10).to(dtype)
    row_tensor = None if rows is None else torch.tensor(rows, dtype=torch.int64)
    return Case(logits, bitmask, row_tensor)


def reference(case: Case) -> torch.Tensor:
    """The masked logits, deciding every token with Python ints."""
    out = case.logits.clone()
    rows = range(case.bitmask.shape[0]) if case.rows is None else case.rows.tolist()
    for mask_row, logits_row in enumerate(rows):
        words = case.bitmask[mask_row].tolist()
        for token in range(out.shape[1]):
            word = token >> 5
            allowed = word < len(words) and (words[word] >> (token & 31)) & 1
            if not allowed:
                out[logits_row, token] = float("-inf")
    return out


def masked_with(apply, case: Case, device: str = "cpu") -> torch.Tensor:
    logits = case.logits.clone().to(device)
    rows = None if case.rows is None else case.rows.clone().to(device)
    apply(logits, case.bitmask.clone().to(device), rows)
    return logits.cpu()


CASES = {
    "vocab-multiple-of-32": {"batch": 3, "vocab": 128, "words": 4},
    "vocab-not-multiple-of-32": {"batch": 3, "vocab": 100, "words": 4},
    "logits-wider-than-bitmask": {"batch": 2, "vocab": 150, "words": 3},
    "rows-subset": {"batch": 6, "vocab": 70, "words": 3, "rows": [4, 0, 5]},
    "all-zero-rows": {"batch": 4, "vocab": 90, "words": 3, "zero_rows": (0, 2)},
    "all-zero-rows-subset": {"batch": 5, "vocab": 90, "words": 3, "rows": [1, 3], "zero_rows": (1,)},
    "fp16": {"batch": 2, "vocab": 99, "words": 4, "dtype": torch.float16},
    "bf16-rows": {"batch": 3, "vocab": 99, "words": 4, "rows": [2], "dtype": torch.bfloat16},
    "several-program-blocks": {"batch": 2, "vocab": 4500, "words": 141, "rows": [1, 0]},
}


@pytest.mark.parametrize("name", CASES)
def test_torch_matches_reference(name):
    case = make_case(**CASES[name])
    assert torch.equal(masked_with(apply_token_bitmask_torch, case), reference(case))


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 5),
    vocab=st.integers(1, 200),
    words=st.integers(1, 8),
    data=st.data(),
)
def test_torch_matches_reference_random(batch, vocab, words, data):
    rows = data.draw(st.none() | st.lists(st.integers(0, batch - 1), min_size=1, max_size=batch, unique=True))
    case = make_case(batch=batch, vocab=vocab, words=words, rows=rows, seed=data.draw(st.integers(0, 999)))
    assert torch.equal(masked_with(apply_token_bitmask_torch, case), reference(case))


def test_allowed_logits_keep_their_bits():
    """Allowed logits are untouched, -0.0 and infinities included."""
    logits = torch.tensor([[-0.0, float("inf"), float("-inf"), 1e-30, 3.0]])
    bitmask = torch.tensor([[0b01111]], dtype=torch.int32)
    expected = logits.clone()
    expected[0, 4] = float("-inf")
    apply_token_bitmask_torch(logits, bitmask)
    assert torch.equal(logits.view(torch.int32), expected.view(torch.int32))


def test_bit_31_is_token_31():
    logits = torch.zeros(1, 64)
    apply_token_bitmask_torch(logits, torch.tensor([[-2**31, 1]], dtype=torch.int32))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [31, 32]


def test_dispatch_on_cpu_uses_torch():
    case = make_case(**CASES["rows-subset"])
    assert torch.equal(masked_with(apply_token_bitmask, case), reference(case))


@pytest.mark.parametrize("bitmask, rows", [
    (torch.zeros(2, 4, dtype=torch.int64), None),  # not int32
    (torch.zeros(3, 4, dtype=torch.int32), None),  # 3 mask rows for 2 logits rows
    (torch.zeros(2, 4, dtype=torch.int32), torch.tensor([1])),  # 2 mask rows for 1 index
])
def test_rejects_mismatched_shapes(bitmask, rows):
    with pytest.raises(ValueError):
        apply_token_bitmask_torch(torch.zeros(2, 100), bitmask, rows)


@pytest.mark.skipif(INTERPRETED or not HAS_TRITON, reason="compiles the real (not interpreted) kernel")
@pytest.mark.parametrize("has_rows", [False, True])
def test_triton_kernel_compiles_for_gpu(has_rows):
    """Compile to an sm_90 cubin without a GPU: catches what the lenient interpreter accepts."""
    compiler = pytest.importorskip("triton.compiler")
    target = pytest.importorskip("triton.backends.compiler").GPUTarget("cuda", 90, 32)
    kernel = logits_mask._bitmask_kernel
    pointers = {"logits_ptr": "*bf16", "bitmask_ptr": "*i32", "rows_ptr": "*i64"}
    constexprs = {"HAS_ROWS": has_rows, "BLOCK_V": logits_mask._BLOCK_V}
    names = list(inspect.signature(kernel.fn).parameters)
    signature = {name: "constexpr" if name in constexprs else pointers.get(name, "i32") for name in names}
    source = compiler.ASTSource(
        kernel, signature, constexprs={(names.index(name),): value for name, value in constexprs.items()})
    with warnings.catch_warnings():  # Triton 3.9 nags about a default changing in 3.10
        warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
        compiler.compile(source, target=target)


@pytest.mark.skipif(INTERPRETED or not HAS_TRITON, reason="needs Triton; not recursive")
def test_triton_kernel_interpreted():
    assert_passes_interpreted(__file__)


class TestTritonInterpreted:
    # Collected in the TRITON_INTERPRET=1 process that test_triton_kernel_interpreted starts,
    # and on a machine with a GPU, where the kernel runs compiled.
    __test__ = INTERPRETED or KERNEL_DEVICE == "cuda"

    @pytest.mark.parametrize("name", CASES)
    def test_matches_torch(self, name):
        case = make_case(**CASES[name])
        expected = masked_with(apply_token_bitmask_torch, case)
        actual = masked_with(logits_mask.apply_token_bitmask_triton, case, KERNEL_DEVICE)
        assert torch.equal(actual, expected)

    def test_strided_logits(self):
        """Logits as a strided view of a wider buffer (every other row and column)."""
        case = make_case(batch=3, vocab=100, words=4, rows=[2, 0])
        buffer = torch.randn(6, 200)
        buffer[::2, ::2] = case.logits
        expected = buffer.clone()
        expected[::2, ::2] = masked_with(apply_token_bitmask_torch, case)
        for apply, device in ((apply_token_bitmask_torch, "cpu"),
                              (logits_mask.apply_token_bitmask_triton, KERNEL_DEVICE)):
            actual = buffer.clone().to(device)
            apply(actual[::2, ::2], case.bitmask.to(device), case.rows.to(device))
            assert torch.equal(actual.cpu(), expected), apply.__name__
