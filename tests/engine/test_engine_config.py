"""EngineConfig holds every engine option and its default; bad values are refused by
name before anything loads, and an engine built from a config is the one asked for."""

from __future__ import annotations

import pytest

from structgen.engine.config import EngineConfig
from structgen.engine.engine import Engine
from structgen.engine.sampling_params import InvalidParameterError
from tests.engine.tiny_models import make_checkpoint


@pytest.mark.parametrize("options, name", [
    ({"block_size": 0}, "block_size"), ({"max_num_seqs": -1}, "max_num_seqs"),
    ({"kv_cache_bytes": 1.5}, "kv_cache_bytes"), ({"gpu_memory_utilization": 0.0}, "gpu_memory_utilization"),
    ({"max_model_len": True}, "max_model_len"),
])
def test_bad_options_are_refused_by_name(options, name):
    with pytest.raises(InvalidParameterError) as caught:
        EngineConfig(**options)
    assert caught.value.param == name


def test_defaults_depend_on_the_device_where_they_say_so():
    config = EngineConfig()
    assert (config.num_seqs(on_gpu=False), config.num_seqs(on_gpu=True)) == (64, 256)
    assert (config.batched_tokens(on_gpu=False), config.batched_tokens(on_gpu=True)) == (2048, 8192)
    assert EngineConfig(max_num_seqs=3).num_seqs(on_gpu=True) == 3


def test_an_engine_is_built_from_its_config(tmp_path):
    make_checkpoint("llama", tmp_path)
    model = str(tmp_path)
    config = EngineConfig(model=model, kv_cache_bytes=4 << 20, max_num_seqs=3, block_size=8, jump_forward=False)
    engine = Engine(config)
    assert engine.engine_config is config
    assert (engine.scheduler.max_num_seqs, engine.block_size, engine.jump_forward) == (3, 8, False)
    same = Engine(model, kv_cache_bytes=4 << 20, max_num_seqs=3, block_size=8, jump_forward=False)
    assert same.engine_config == config
    with pytest.raises(TypeError, match="in the EngineConfig"):
        Engine(config, max_num_seqs=4)
