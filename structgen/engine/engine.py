"""The engine: requests in, tokens out, one scheduled step at a time.

`Engine.add_request` queues a tokenized prompt with its `SamplingParams`; each `step()`
schedules a batch (scheduler), runs it (model runner), masks the logits of constrained
requests with their matchers, samples (sampler), appends the tokens, detokenizes, checks
stop conditions and frees finished requests. `generate()` drives `step()` until a list of
prompts is done. Owns the request table and the wiring; the parts own their own logic.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from structgen.background import engine_threads
from structgen.startup import phase
from structgen.engine import host_memory, kv_cache
from structgen.engine.block_manager import BlockManager, BlockStats
from structgen.engine.config import DEFAULT_CPU_KV_BYTES, EngineConfig
from structgen.engine.detokenizer import IncrementalDetokenizer
from structgen.engine.jump_forward import RETOKENIZED_TAIL, Jump, plan_jump
from structgen.engine.masks import MIN_PATIENCE_S, GrammarMasks, patience
from structgen.engine.models.loader import load_model
from structgen.engine.models.quantization import AUTO, FLOAT, NATIVE, check_fp8_device, quantize_model
from structgen.engine.request import Request, RequestOutput
from structgen.engine.runner import ModelRunner
from structgen.engine.sampler import Sampler, SamplerRow
from structgen.engine.sampling_params import InvalidParameterError, SamplingParams
from structgen.engine.scheduler import ScheduledChunk, Scheduler
from structgen.errors import StructgenError

class PromptTooLongError(StructgenError):
    """A prompt (plus its max_tokens) that can never fit the model's context or KV cache."""


@dataclass
class EngineStats:
    waiting: int
    running: int
    blocks: BlockStats
    num_preemptions: int
    steps: int


class Engine:
    def __init__(self, config: EngineConfig | Any = None, **options: Any):
        """`Engine(EngineConfig(...))`, or `Engine(model, **options)` with the options of
        `EngineConfig` as keywords."""
        if not isinstance(config, EngineConfig):
            config = EngineConfig(model=config, **options)
        elif options:
            raise TypeError(f"give the options in the EngineConfig, not beside it: {sorted(options)}")
        self.engine_config = config
        self.device = torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        on_gpu = self.device.type == "cuda"
        self.dtype = _dtype(config.dtype, on_gpu)
        if not on_gpu and config.keep_freed_memory:
            host_memory.keep_freed_memory()
        loaded = load_model(config.model, load_format=config.load_format, dtype=self.dtype, device=self.device,
                            max_positions=config.max_model_len, seed=config.seed)
        self.model, self.config, self.model_name = loaded.model, loaded.config, loaded.name
        self._quantize(loaded, config, on_gpu)
        self.kv_dtype = _kv_dtype(config.kv_cache_dtype, self.dtype, self.quantization, self.device)
        self.max_model_len = min(config.max_model_len or self.config.max_position_embeddings,
                                 self.config.max_position_embeddings)
        self.tokenizer, self.vocab = _tokenizer_and_vocab(config.tokenizer, loaded)
        self._special_token_text = _special_token_text(self.tokenizer, self.vocab)
        self.eos_token_ids = frozenset(self.config.eos_token_ids) | frozenset(
            self.vocab.eos_token_ids if self.vocab is not None else ()
        )
        self.block_size = config.block_size
        num_blocks = self._num_blocks(config.kv_cache_bytes, config.gpu_memory_utilization)
        self.blocks = BlockManager(num_blocks, self.block_size, config.enable_prefix_caching)
        self.scheduler = Scheduler(self.blocks, max_num_seqs=config.num_seqs(on_gpu),
                                   max_num_batched_tokens=config.batched_tokens(on_gpu))
        with phase(f"allocating the KV cache ({num_blocks} blocks of {self.block_size} tokens)"):
            caches = kv_cache.allocate_kv_cache(self.config, num_blocks + 1, self.block_size, self.kv_dtype,
                                                self.device)
        backend = _backend(config.attention_backend, on_gpu)
        self.runner = ModelRunner(self.model, caches, self.block_size, backend, self.device)
        if on_gpu and config.cuda_graphs and getattr(backend, "GRAPH_CAPTURABLE", False):
            # Decode steps of up to max_num_seqs sequences replay captured graphs.
            with phase("capturing CUDA graphs of decode steps"):
                self.runner.capture_decode_graphs(self.scheduler.max_num_seqs, self.max_model_len)
        self.sampler = Sampler()
        self.jump_forward = config.jump_forward
        self.prefill_while_compiling = (on_gpu if config.prefill_while_compiling is None
                                        else config.prefill_while_compiling)
        # Masks are filled in worker threads (engine.masks); a late one holds up only its
        # own request. They start before the forward pass on GPU, where it runs
        # asynchronously, and after it on CPU, where both would share the same cores.
        self._masks_first = on_gpu if config.overlap_masks is None else config.overlap_masks
        words = -(-self.config.vocab_size // 32)
        self.masks = GrammarMasks(words)
        self._held: list[Request] = []  # their logits wait for a late mask
        self._jumping: list[Request] = []  # their forced bytes are being worked out
        # A CPU forward pass gives a core to each piece of background work (structgen.background).
        self._cores = torch.get_num_threads() if not on_gpu else 0
        self.requests: dict[str, Request] = {}
        self.compiling: list[Request] = []  # waiting for their grammar, beside the batch
        self._ids = itertools.count()
        self._steps = 0
        self._preemptions = 0
        torch.manual_seed(config.seed)

    # -- requests -----------------------------------------------------------------------

    def _quantize(self, loaded, config: EngineConfig, on_gpu: bool) -> None:
        """Quantize the weights to `config.quantization`. A GGUF file's 4- and 8-bit layers
        are taken as they are stored on CPU, where the packed kernels run them ("native",
        and "int4" where the file's groups are its own). "auto" (the default) is native
        for the embedded model on CPU and float otherwise; `self.quantization` says which."""
        mode = config.quantization
        if mode == AUTO:
            mode = NATIVE if loaded.embedded and not on_gpu else FLOAT
        self.quantization = FLOAT if mode is None else mode
        if mode in (None, FLOAT):
            return
        stored = loaded.stored_linears() if not on_gpu and mode in (NATIVE, "int4") else {}
        what = "the GGUF file's own formats" if mode == NATIVE else mode
        with phase(f"quantizing the weights to {what}"):
            quantize_model(self.model, mode, config.quantization_group_size, stored)

    def add_request(self, prompt_token_ids: Sequence[int], sampling_params: SamplingParams | None = None,
                    request_id: str | None = None, matcher: Any = None, *, grammar: Any = None,
                    jump_forward: bool | None = None) -> str:
        """Queue a tokenized prompt; returns its request id.

        Constrained decoding: `grammar` is a CompiledGrammar, or a `concurrent.futures.Future`
        of one that is still compiling (the request waits beside the running batch until
        it resolves; a failed compile finishes it with finish_reason "error"). `matcher`
        gives a ready-made Matcher instead. `jump_forward` (default: the engine's setting)
        appends the bytes the grammar forces as one prefill instead of decoding them."""
        params = sampling_params or SamplingParams()
        prompt = self.check_prompt(prompt_token_ids, params)
        request_id = request_id if request_id is not None else f"req-{next(self._ids)}"
        if request_id in self.requests:
            raise InvalidParameterError("request_id", f"{request_id!r} is already in use")
        if params.stop and self.vocab is None:
            raise InvalidParameterError("stop", "stop strings need a tokenizer; this engine has none")
        detok = None
        if self.vocab is not None:
            detok = IncrementalDetokenizer(self.vocab, params, self._special_token_text)
        request = Request(request_id, prompt, params, detok)
        request.jump_forward = self.jump_forward if jump_forward is None else jump_forward
        self.requests[request_id] = request
        if grammar is not None and hasattr(grammar, "done"):  # a Future: compiling
            request.grammar_future = grammar
            self.compiling.append(request)
            if self.prefill_while_compiling:
                self.scheduler.add(request)  # its prompt is computed while the grammar compiles
            self._admit_compiled()
            return request_id
        if grammar is not None:
            matcher = grammar.matcher()
        request.matcher = matcher
        self.scheduler.add(request)
        return request_id

    def _admit_compiled(self) -> list[RequestOutput]:
        """Give the requests whose grammar finished compiling their matcher: queue those
        that waited to be scheduled, and start the first mask of those whose prompt is
        computed (held, `_hold`). Fail those whose compile failed."""
        failed = []
        for request in [r for r in self.compiling if r.grammar_future.done()]:
            self.compiling.remove(request)
            request.metrics.compile_time_s = time.monotonic() - request.metrics.arrival_time
            try:
                request.matcher = request.grammar_future.result().matcher()
            except Exception as exc:  # the compile's own error, reported to the caller
                request.error = str(exc) or type(exc).__name__
                request.finish_reason = "error"
                self._fail_compiled(request)
                failed.append(self._output(request))
                continue
            if request not in self.scheduler.running and request not in self.scheduler.waiting:
                self.scheduler.add(request)  # it waited to be scheduled at all
            elif request.awaiting_mask:
                self.masks.submit([request])
        return failed

    def _fail_compiled(self, request: Request) -> None:
        """End a request whose grammar failed to compile, wherever it waited (its prompt's
        blocks, if it took any, are freed)."""
        if request in self._held:
            self._held.remove(request)
            request.held_logits = None
        self._finish(request)

    def check_prompt(self, prompt_token_ids: Sequence[int], params: SamplingParams) -> list[int]:
        prompt = [int(t) for t in prompt_token_ids]
        if not prompt:
            raise InvalidParameterError("prompt", "the prompt is empty")
        vocab_size = self.config.vocab_size
        bad = next((t for t in prompt if not 0 <= t < vocab_size), None)
        if bad is not None:
            raise InvalidParameterError("prompt", f"token id {bad} is outside the vocabulary (0..{vocab_size - 1})")
        total = len(prompt) + params.max_tokens
        if total > self.max_model_len:
            raise PromptTooLongError(
                f"the prompt has {len(prompt)} tokens and max_tokens is {params.max_tokens}: "
                f"{total} exceeds the model's context of {self.max_model_len} tokens"
            )
        blocks_needed = -(-total // self.block_size)
        if blocks_needed > self.blocks.num_blocks:
            raise PromptTooLongError(
                f"prompt plus max_tokens ({total} tokens) needs {blocks_needed} KV blocks; "
                f"the cache holds {self.blocks.num_blocks}"
            )
        return prompt

    def abort(self, request_id: str) -> bool:
        """Stop a request at once and free everything it holds; False if it is unknown."""
        request = self.requests.pop(request_id, None)
        if request is None:
            return False
        if request in self.compiling:
            self.compiling.remove(request)
            request.grammar_future.cancel()
        self.scheduler.finish(request)
        request.finish_reason = "abort"
        return True

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished() or bool(self.compiling)

    # -- the step ---------------------------------------------------------------------

    @torch.inference_mode()
    def step(self) -> list[RequestOutput]:
        """Run one scheduled batch; outputs for every request that advanced or finished."""
        outputs = self._admit_compiled() if self.compiling else []
        if self._held:
            outputs += self._sample_held()
        if self._jumping:
            outputs += self._finish_jumps()
        plan = self.scheduler.schedule()
        self._preemptions += len(plan.preempted)
        self._drop_held(plan.preempted)
        if not plan.chunks:
            self._idle(bool(outputs))
            return outputs
        self._steps += 1
        started = time.perf_counter()
        if self.blocks.fresh_blocks:
            self.runner.zero_blocks(self.blocks.fresh_blocks)
            self.blocks.fresh_blocks.clear()
        sampling = [c.request for c in plan.chunks if c.samples]
        constrained = [r for r in sampling if r.matcher is not None]
        if self._masks_first:  # masks on the CPU while the device runs the forward
            self.masks.submit(constrained)
        self._share_cores()
        logits = self.runner.execute(plan.chunks)
        self.masks.submit(constrained)
        late = self.masks.wait(constrained, patience(time.perf_counter() - started)) if constrained else []
        late += [r for r in sampling if r.matcher is None and r.grammar_future is not None]  # still compiling
        for chunk in plan.chunks:
            self.scheduler.on_computed(chunk)
        if late:
            logits, sampling = self._hold(late, logits, sampling)
        if sampling:
            outputs += self._sample(logits, sampling)
        return outputs

    def _share_cores(self) -> None:
        if self._cores:
            threads = engine_threads(self._cores, extra=1 if self._held else 0)
            if threads != torch.get_num_threads():
                torch.set_num_threads(threads)

    def _idle(self, reported: bool) -> None:
        """Nothing to run: wait a moment for a compile or the grammar instead of spinning."""
        jobs = [r.mask_job for r in self._held if r.mask_job is not None] + [r.jump_job for r in self._jumping]
        if jobs:
            self.masks.wait_any(jobs, 0.001 if self.compiling else 0.005)
        elif self.compiling and not reported:
            time.sleep(0.001)

    def _hold(self, late: list[Request], logits: torch.Tensor, sampling: list[Request]):
        """Keep the logits rows of requests whose masks are late (or whose grammar still
        compiles: its first mask starts once it is there); the rest go on."""
        late_ids = {id(r) for r in late}
        keep = [i for i, r in enumerate(sampling) if id(r) not in late_ids]
        for i, request in enumerate(sampling):
            if id(request) in late_ids:
                request.held_logits = logits[i].clone()
                self._held.append(request)
        return logits[keep], [sampling[i] for i in keep]

    def _sample_held(self) -> list[RequestOutput]:
        """Sample the held requests whose masks are now ready (aborted ones are dropped)."""
        ready = [r for r in self._held if r.is_finished or (r.mask_job is not None and r.mask_job.done())]
        if not ready:
            return []
        self._held = [r for r in self._held if r not in ready]
        ready = [r for r in ready if not r.is_finished]
        logits = torch.stack([r.held_logits for r in ready]) if ready else None
        for request in ready:
            request.held_logits = None
        return self._sample(logits, ready) if ready else []

    def _finish_jumps(self) -> list[RequestOutput]:
        """Jump the requests whose forced bytes are now known (most within microseconds:
        a short wait lets them run in this step)."""
        self.masks.wait_any([r.jump_job for r in self._jumping], MIN_PATIENCE_S)
        done = [r for r in self._jumping if r.is_finished or r.jump_job.done()]
        self._jumping = [r for r in self._jumping if r not in done]
        outputs = []
        for request in done:
            failed = request.jump_job.exception() is not None  # (its grammar outgrew a budget)
            request.jump_job = None
            if request.is_finished:
                continue
            if not failed:
                try:
                    self._jump_forward(request, built_only=False)  # the rows are built: at once
                except Exception as exc:  # one request's failure must not end the others
                    request.error = f"{type(exc).__name__}: {exc}"
                    request.finish_reason = "error"
            if request.finish_reason is not None:
                self._finish(request)
            outputs.append(self._output(request))
        return outputs

    def _drop_held(self, requests: list[Request]) -> None:
        """Forget held logits (a preempted request computes them again; its mask job,
        for the same state, stays)."""
        for request in requests:
            if request.awaiting_mask:
                request.held_logits = None
                self._held.remove(request)

    def _sample(self, logits: torch.Tensor, requests: list[Request]) -> list[RequestOutput]:
        """Mask, sample and advance the requests of the rows of `logits` (their masks ready)."""
        self._apply_grammar_masks(logits, requests)
        rows = [SamplerRow(r.params, r.output_token_ids, r.generator) for r in requests]
        sampled = self.sampler.sample(logits, rows, strict=False)
        outputs = []
        now = time.monotonic()
        for request, token, logprobs in zip(requests, sampled.token_ids, sampled.logprobs):
            request.mask_job = None  # the next state needs its own
            if token < 0 and request.error is None:
                request.error = _nothing_to_sample(request)
            if request.error is None:
                try:
                    self._advance(request, token, logprobs, now)
                except Exception as exc:  # one request's failure must not end the others
                    request.error = f"{type(exc).__name__}: {exc}"
            if request.error is not None:
                request.finish_reason = "error"
            if request.finish_reason is not None and not request.is_finished:
                self._finish(request)
            outputs.append(self._output(request))
        return outputs

    def _apply_grammar_masks(self, logits: torch.Tensor, requests: list[Request]) -> None:
        """Disallow, in each constrained row, every token its matcher rejects (and the
        model's padded vocabulary rows, which no matcher allows)."""
        rows = [i for i, r in enumerate(requests) if r.matcher is not None]
        if not rows:
            return
        from structgen.engine.kernels.logits_mask import apply_token_bitmask

        bitmask = self.masks.batch([requests[i] for i in rows], pin=self.device.type == "cuda")
        index = None  # every row constrained: bitmask row i masks logits row i
        if len(rows) != logits.shape[0]:
            index = torch.tensor(rows, dtype=torch.int64).to(logits.device, non_blocking=True)
        apply_token_bitmask(logits, bitmask.to(logits.device, non_blocking=True), index)

    def _advance(self, request: Request, token: int, logprobs: Any, now: float) -> None:
        if request.metrics.first_token_time is None:
            request.metrics.first_token_time = now
        request.append_tokens([token])
        request.metrics.num_sampled_tokens += 1
        if request.params.logprobs is not None:
            request.logprobs.append(logprobs)
        if request.matcher is not None and not request.matcher.accept_token(token):
            raise RuntimeError(f"the grammar rejected token {token} that its own mask allowed")
        self._check_stop(request, token)
        if request.finish_reason is None and request.jump_forward and request.matcher is not None:
            self._jump_forward(request)

    def _jump_forward(self, request: Request, built_only: bool = True) -> None:
        """Append the tokens of the bytes the grammar now forces (see jump_forward.py).
        Where they need automaton rows not built yet, the request sits out while a mask
        thread builds them (`_finish_jumps`): building one here would stop the batch."""
        forced = request.matcher.forced_bytes(built_only=built_only)
        if forced is None:
            request.jump_job = self.masks.run(request.matcher.forced_bytes)
            self._jumping.append(request)
            return
        if not forced or self.tokenizer is None:
            return
        # Only re-tokenize generated tokens that sit in private blocks: full blocks are
        # registered in the prefix cache and may be shared, so they must not change.
        first_movable = max(request.num_prompt_tokens,
                            request.num_registered_blocks * self.block_size,
                            request.num_tokens - RETOKENIZED_TAIL)
        tail = request.all_token_ids[first_movable:]
        room = request.params.max_tokens - request.num_output_tokens
        room = min(room, self.max_model_len - request.num_tokens)
        if room <= 0:
            return
        jump = plan_jump(tail, forced, self.vocab, self.tokenizer, max_new_tokens=room)
        if jump is None or not self._move_matcher(request.matcher, tail, jump):
            return
        request.remove_last_tokens(jump.rollback, self.block_size)
        request.append_tokens(jump.append)
        if request.params.logprobs is not None:
            del request.logprobs[len(request.logprobs) - jump.rollback:]
            request.logprobs.extend([None] * len(jump.append))
        request.metrics.num_forced_tokens += len(jump.append) - jump.rollback
        request.metrics.num_jumps += 1
        stop = request.detokenizer.append_bytes(jump.new_bytes) if request.detokenizer else None
        if stop is not None:
            request.finish_reason, request.stop_reason = "stop", stop
        else:
            self._check_complete_or_full(request)

    @staticmethod
    def _move_matcher(matcher: Any, tail: list[int], jump: Jump) -> bool:
        """Roll the matcher back over the replaced tokens and feed it the jump's tokens;
        on any refusal restore it exactly and report False."""
        replaced = tail[len(tail) - jump.rollback:]
        matcher.rollback(jump.rollback)
        for count, token in enumerate(jump.append):
            if not matcher.accept_token(token):
                matcher.rollback(count)
                for old in replaced:
                    matcher.accept_token(old)
                return False
        return True

    def _check_stop(self, request: Request, token: int) -> None:
        params = request.params
        if not params.ignore_eos and token in self.eos_token_ids:
            request.finish_reason = "stop"  # EOS has no text
        elif token in params.stop_token_ids:
            request.finish_reason, request.stop_reason = "stop", token
            if params.include_stop_str_in_output and request.detokenizer is not None:
                request.detokenizer.append([token])
        elif request.detokenizer is not None and (stop := request.detokenizer.append([token])) is not None:
            request.finish_reason, request.stop_reason = "stop", stop
        else:
            self._check_complete_or_full(request)

    def _check_complete_or_full(self, request: Request) -> None:
        """Finish when the grammar allows nothing more, or the request has no room left."""
        if request.matcher is not None and request.matcher.is_terminated():
            request.finish_reason = "stop"
        elif request.num_output_tokens >= request.params.max_tokens or request.num_tokens >= self.max_model_len:
            request.finish_reason = "length"

    def _finish(self, request: Request) -> None:
        self.scheduler.finish(request)
        request.metrics.finished_time = time.monotonic()
        self.requests.pop(request.request_id, None)

    def _output(self, request: Request) -> RequestOutput:
        output_ids = request.output_token_ids
        new_ids = output_ids[request.num_sent_tokens:]
        request.num_sent_tokens = len(output_ids)
        new_text, text = "", ""
        if request.detokenizer is not None:
            new_text = request.detokenizer.take_new_text()
            if request.is_finished and not isinstance(request.stop_reason, str):
                new_text += request.detokenizer.finish()  # release held-back text
            text = request.detokenizer.text
        return RequestOutput(
            request_id=request.request_id,
            prompt_token_ids=request.prompt_token_ids,
            token_ids=list(output_ids),
            text=text,
            new_token_ids=new_ids,
            new_text=new_text,
            finished=request.is_finished,
            finish_reason=request.finish_reason,
            stop_reason=request.stop_reason,
            logprobs=list(request.logprobs) if request.params.logprobs is not None else None,
            num_cached_tokens=request.num_cached_tokens,
            metrics=request.metrics,
            error=request.error,
        )

    # -- conveniences -------------------------------------------------------------------

    def generate(self, prompts: Sequence[str | Sequence[int]],
                 params: SamplingParams | Sequence[SamplingParams] | None = None,
                 progress: bool = False, grammars: Sequence[Any] | None = None) -> list[RequestOutput]:
        """Run every prompt (text or token ids) to completion, batched; outputs in order.
        `grammars`: one CompiledGrammar (or None) per prompt constrains its output."""
        if isinstance(params, SamplingParams) or params is None:
            params = [params or SamplingParams()] * len(prompts)
        grammars = list(grammars) if grammars is not None else [None] * len(prompts)
        if len(params) != len(prompts) or len(grammars) != len(prompts):
            raise InvalidParameterError("params", "give one SamplingParams (and grammar) or one per prompt")
        ids = [self.add_request(self._tokenize(p), sp, matcher=g.matcher() if g is not None else None)
               for p, sp, g in zip(prompts, params, grammars)]
        final: dict[str, RequestOutput] = {}
        bar = _progress(len(ids), progress)
        try:
            while len(final) < len(ids):
                for out in self.step():
                    if out.finished:
                        final[out.request_id] = out
                        bar.update(1)
        finally:
            bar.close()
            for request_id in ids:
                if request_id not in final:
                    self.abort(request_id)
        return [final[i] for i in ids]

    def _tokenize(self, prompt: str | Sequence[int]) -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise InvalidParameterError("prompt", "text prompts need a tokenizer; pass token ids")
            return self.tokenizer.encode(prompt, add_special_tokens=False)
        return list(prompt)

    def _num_blocks(self, kv_cache_bytes: int | None, gpu_fraction: float) -> int:
        if kv_cache_bytes is None:
            if self.device.type == "cuda":
                kv_cache_bytes = kv_cache.gpu_budget_bytes(self.device, gpu_fraction)
            else:
                kv_cache_bytes = DEFAULT_CPU_KV_BYTES
        # One block of the budget is the null block (see block_manager).
        num_blocks = kv_cache.blocks_for_budget(self.config, self.block_size, self.kv_dtype, kv_cache_bytes) - 1
        if num_blocks < 1:
            raise InvalidParameterError("kv_cache_bytes", f"{kv_cache_bytes} bytes hold no KV block")
        return num_blocks

    def stats(self) -> EngineStats:
        return EngineStats(len(self.scheduler.waiting), len(self.scheduler.running),
                           self.blocks.stats(), self._preemptions, self._steps)


def _nothing_to_sample(request: Request) -> str:
    """Why a request got no token: its whole row was masked, or its logits were not finite."""
    if request.matcher is None:
        return "the model's logits had no finite value to sample from"
    return (f"the grammar allowed no token after {request.num_output_tokens} output tokens "
            f"({request.matcher.grammar!r}); please report the request that led here")


def _dtype(dtype: torch.dtype | str | None, on_gpu: bool, option: str = "dtype",
           extra: tuple[str, ...] = ()) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if on_gpu else torch.float32
    names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    chosen = names.get(dtype) if isinstance(dtype, str) else dtype
    if chosen not in names.values():
        raise InvalidParameterError(option, f"unknown dtype {dtype!r}; use one of {', '.join((*names, *extra))}")
    return chosen


def _kv_dtype(option: torch.dtype | str | None, model_dtype: torch.dtype, quantization: str,
              device: torch.device) -> torch.dtype:
    """The KV cache's dtype: the option's; unset, float16 under native quantization on CPU
    (as llama.cpp's default cache; docs/engine.md has the measures), else the model's.
    int8 and fp8 store a byte per element (kernels/quantized_kv.py); fp8 on a GPU needs
    compute capability 8.9, as fp8 weights do."""
    on_gpu = device.type == "cuda"
    if option is not None:
        one_byte = kv_cache.ONE_BYTE_DTYPES.get(option) if isinstance(option, str) else option
        if one_byte in kv_cache.ONE_BYTE_DTYPES.values():
            if one_byte is torch.float8_e4m3fn and on_gpu:
                check_fp8_device(device)  # fp8 conversions in the kernels need it
            return one_byte
        return _dtype(option, on_gpu, "kv_cache_dtype", extra=tuple(kv_cache.ONE_BYTE_DTYPES))
    return torch.float16 if quantization == NATIVE and not on_gpu else model_dtype


def _backend(name: str, on_gpu: bool):
    if name == "auto":
        name = "triton" if on_gpu else "torch"
    if name == "torch":
        from structgen.engine.kernels import attention_torch

        return attention_torch
    if name == "triton":
        from structgen.engine.kernels import attention_triton

        return attention_triton
    raise InvalidParameterError("attention_backend", f"unknown backend {name!r}; use auto, torch or triton")


def _tokenizer_and_vocab(tokenizer: Any, loaded) -> tuple[Any, Any]:
    """The tokenizer to use (given, or the one beside the weights) and its Vocabulary."""
    from structgen.vocab import Vocabulary

    if tokenizer is None and loaded.folder is not None and (loaded.folder / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(loaded.folder), local_files_only=True)
    if tokenizer is None:
        return None, None
    return tokenizer, Vocabulary.from_tokenizer(tokenizer, vocab_size=loaded.config.vocab_size)


def _special_token_text(tokenizer: Any, vocab: Any) -> dict[int, str]:
    """How special tokens read when a request keeps them (skip_special_tokens=False)."""
    if tokenizer is None or vocab is None:
        return {}
    ids = sorted(i for i in vocab.special_ids if i < len(tokenizer))
    return dict(zip(ids, tokenizer.convert_ids_to_tokens(ids)))


class _NoProgress:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, show: bool):
    if not show:
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(total=total, desc="requests", unit="req")
