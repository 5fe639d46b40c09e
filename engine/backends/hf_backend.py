"""Hugging Face `transformers` + `outlines` backend: one request at a time.

It serves models vLLM cannot run, cross-checks vLLM (same prompts, same verdict languages), and
is the one-prompt-at-a-time baseline of the benchmark. Label and analyze modes constrain through
an outlines `Generator` built once per language; distribution mode reads the next-token logits
at the decision point directly (no constraint, so no renormalisation).
"""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

from grammars.analysis import Analyzed
from grammars.compile import outlines_output_type

from ..distribution import label_tokens, normalise
from ..errors import BackendUnavailable
from ..models import ResolvedJudge
from ..render import PromptRenderer
from .base import Generation, LocalBackend, Prepared


class TransformersBackend(LocalBackend):
    name = "transformers"

    def __init__(self, judge: ResolvedJudge, dtype: str = "bfloat16"):
        try:
            import outlines
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise BackendUnavailable(f"the transformers backend needs `pip install litjudge[hf]` ({exc})") from None
        self.torch = torch
        self.judge = judge
        tok = AutoTokenizer.from_pretrained(judge.path)
        self.model = AutoModelForCausalLM.from_pretrained(judge.path, dtype=getattr(torch, dtype)).eval()
        self.outlines_model = outlines.from_transformers(self.model, tok)
        self.renderer = PromptRenderer(tok, judge.chat)
        self._generators: dict[str, object] = {}
        self._max_len = int(getattr(getattr(self.model.config, "text_config", self.model.config),
                                    "max_position_embeddings", 4096))

    def describe(self) -> dict:
        import outlines
        import transformers

        return {"backend": "transformers", "transformers_version": transformers.__version__,
                "outlines_version": getattr(outlines, "__version__", "?"), "dtype": str(self.model.dtype)}

    def close(self) -> None:
        self._generators.clear()

    def _generator(self, language):
        import outlines

        fp = language.fingerprint()
        if fp not in self._generators:
            self._generators[fp] = outlines.Generator(self.outlines_model, outlines_output_type(language))
        return self._generators[fp]

    def _constrained(self, prompt: str, language, p: Prepared) -> str:
        s = p.request.sampling
        kwargs = {"max_new_tokens": p.max_tokens}
        if s.greedy:
            kwargs["do_sample"] = False
        else:
            self.torch.manual_seed((s.seed or 0) + 7919 * p.request.attempt)
            kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p)
        return self._generator(language)(prompt, **kwargs)

    def generate(self, batch: Sequence[Prepared], on_done: Callable[[Generation], None] | None = None
                 ) -> Iterator[Generation]:
        for p in batch:
            g = self._one(p)
            if on_done:
                on_done(g)
            yield g

    def _one(self, p: Prepared) -> Generation:
        mode, lang = p.request.mode, p.request.language
        if mode == "label":
            return Generation(p.key, self._constrained(p.prompt, lang, p), prompt_tokens=p.prompt_tokens)
        if mode == "analyze":
            assert isinstance(lang, Analyzed)
            analysis = self._free_text(p, lang).rstrip()
            tail = self._constrained(p.prompt + analysis + lang.tail_prefix, lang.inner, p)
            return Generation(p.key, analysis + lang.tail_prefix + tail, analysis=analysis,
                              prompt_tokens=p.prompt_tokens)
        return self._distribution(p)

    def _free_text(self, p: Prepared, lang: Analyzed) -> str:
        torch = self.torch
        ids = torch.tensor([list(p.token_ids)])
        s = p.request.sampling
        kwargs = dict(max_new_tokens=lang.max_analysis_tokens, stop_strings=[lang.marker],
                      tokenizer=self.renderer.tokenizer, pad_token_id=self.renderer.tokenizer.eos_token_id)
        if s.greedy:
            kwargs["do_sample"] = False
        else:
            torch.manual_seed(s.seed or 0)
            kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p)
        with torch.no_grad():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        text = self.renderer.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        return text.split(lang.marker, 1)[0]

    def _logprobs_after(self, ids: list[int]):
        torch = self.torch
        with torch.no_grad():
            logits = self.model(torch.tensor([ids])).logits[0].float()
        return torch.log_softmax(logits, dim=-1)

    def _distribution(self, p: Prepared) -> Generation:
        labels = p.request.language.labels()
        lt = label_tokens(self.encode, p.prompt, labels)
        lps: dict[str, float] = {}
        if lt.single_token:
            point = list(p.token_ids[:len(p.token_ids) - lt.drop[labels[0]]])
            last = self._logprobs_after(point)[-1]
            lps = {label: float(last[c[0]]) for label, c in lt.continuations.items()}
        else:
            for label in labels:
                full = lt.extend(p.token_ids, label)
                cont = lt.continuations[label]
                lp = self._logprobs_after(full)
                start = len(full) - len(cont)
                lps[label] = float(sum(lp[start - 1 + i, t] for i, t in enumerate(cont)))
        dist, mass = normalise(lps)
        return Generation(p.key, "", distribution=dist, label_mass=mass, prompt_tokens=p.prompt_tokens)
