"""Hugging Face `transformers` + `outlines` backend: one step at a time.

It serves models vLLM cannot run, cross-checks vLLM (same prompts, same verdict languages, same
modes from `engine.backends.local.modes`), and is the one-prompt-at-a-time baseline of the benchmark.
Constrained steps run `generate` on the step's token ids with the logits processor of an outlines
`Generator` built once per constraint (outlines' own entry point takes text: it would tokenize the
prompt again, recognising every special token's text, and wrap it in the chat template a second
time); log-probabilities are read from the next-token logits directly (no constraint, so no
renormalisation). outlines masks the logits with a `torch.compile`d kernel; it runs eagerly here
(74 us a step on one core). Compiled, its first call took 10 s; without a C++ compiler (a slim
image) torch printed a long traceback before falling back; and the kernel was read back from
torch's cache in /tmp, where one compiled under another CPU capability aborted generation.
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

from litjudge.grammars.compile import outlines_output_type

from ..core.backend import JudgeSpec
from ..core.errors import BackendUnavailable
from .base import StepBackend, context_window
from .local.render import PromptRenderer
from .local.steps import Constrained, Decoding, FreeText, NextTokenLogprobs, Step, StepResult
from .tokenizer_only import TokenizerOnly


class TransformersBackend(StepBackend):
    name = "transformers"

    @classmethod
    def plan(cls, spec: JudgeSpec) -> TokenizerOnly:
        return TokenizerOnly(spec)

    def __init__(self, spec: JudgeSpec):
        try:
            import outlines
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise BackendUnavailable(f"the transformers backend needs `pip install 'litjudge[hf]'` ({exc})") from None
        self.torch, self.outlines, self.spec = torch, outlines, spec
        tok = AutoTokenizer.from_pretrained(spec.target)
        self.model = AutoModelForCausalLM.from_pretrained(spec.target, dtype=getattr(torch, spec.engine.dtype)).eval()
        self.outlines_model = outlines.from_transformers(self.model, tok)
        self.renderer = PromptRenderer(tok, spec.chat)
        self._generators: dict[str, Any] = {}
        self._max_len = context_window(spec)
        self._keeps_logits = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self._queue: list[tuple[int, Step]] = []
        self._serial = 0

    def describe(self) -> dict:
        import transformers

        return {"backend": "transformers", "transformers_version": transformers.__version__,
                "outlines_version": getattr(self.outlines, "__version__", "?"), "dtype": str(self.model.dtype)}

    def close(self) -> None:
        self._generators.clear()

    # -- the step primitive: queued, run one at a time ------------------------------------------
    def submit(self, step: Step) -> int:
        self._serial += 1
        self._queue.append((self._serial, step))
        return self._serial

    def poll(self) -> Iterator[tuple[int, StepResult]]:
        if self._queue:
            handle, step = self._queue.pop(0)
            yield handle, self._run(step)

    def _run(self, step: Step) -> StepResult:
        if isinstance(step, Constrained):
            return self._constrained(step)
        if isinstance(step, FreeText):
            return self._free_text(step)
        assert isinstance(step, NextTokenLogprobs)
        last = self._logprobs_after(list(step.prompt.tokens), keep=1)[-1]
        return StepResult(logprobs={i: float(last[i]) for i in step.token_ids})

    def _sampling_kwargs(self, d: Decoding) -> dict:
        if d.temperature == 0.0:
            return {"do_sample": False}
        self.torch.manual_seed(d.seed or 0)
        return {"do_sample": True, "temperature": d.temperature, "top_p": d.top_p}

    def _constrained(self, step: Constrained) -> StepResult:
        if step.choices:
            from outlines.types import Regex

            key, output_type = "choices:" + "\x00".join(step.choices), \
                Regex("(?:" + "|".join(re.escape(c) for c in step.choices) + ")")
        else:
            assert step.language is not None, "a constrained step names choices or a language"
            key, output_type = step.language.fingerprint(), outlines_output_type(step.language)
        if key not in self._generators:
            self._generators[key] = self.outlines.Generator(self.outlines_model, output_type)
        processor = self._generators[key].logits_processor
        processor.reset()
        return self._generate(list(step.prompt.tokens), step.max_tokens, step.decoding, (),
                              logits_processor=self.outlines_model.type_adapter.format_output_type(processor))

    def _free_text(self, step: FreeText) -> StepResult:
        return self._generate(list(step.prompt.tokens), step.max_tokens, step.decoding, step.stop)

    def _generate(self, prompt: list[int], max_tokens: int, decoding: Decoding, stop: tuple[str, ...],
                  **extra: Any) -> StepResult:
        """`generate` on the prompt's token ids (never its text: see the module)."""
        torch = self.torch
        ids = torch.tensor([prompt])
        tok = self.renderer.tokenizer
        kwargs = dict(max_new_tokens=max_tokens, tokenizer=tok, pad_token_id=tok.eos_token_id,
                      **self._sampling_kwargs(decoding), **extra)
        if stop:
            kwargs["stop_strings"] = list(stop)
        with torch.no_grad(), torch.compiler.set_stance("force_eager"):      # see the module
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        new = out[0, ids.shape[1]:].tolist()
        text = tok.decode(new, skip_special_tokens=True)
        for s in stop:
            text = text.split(s, 1)[0]
        return StepResult(text, tuple(new), "length" if len(new) >= max_tokens else "stop")

    def _logprobs_after(self, ids: list[int], keep: int):
        """Log-probabilities at the last `keep` positions of `ids` (rows in order): the vocabulary
        projection of only those (17% of a distribution-mode step with SmolLM2 at 90 tokens), where
        the model's forward takes `logits_to_keep`."""
        torch = self.torch
        kwargs = {"logits_to_keep": keep} if self._keeps_logits else {}
        with torch.no_grad():
            logits = self.model(torch.tensor([ids]), **kwargs).logits[0, -keep:].float()
        return torch.log_softmax(logits, dim=-1)
