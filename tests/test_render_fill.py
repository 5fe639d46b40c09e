"""The prompt layout rendered once and filled (the planner's fast path at a million requests) is
used only where it reproduces the chat template's own render: checked on a template that keeps
the text as it is, one that trims it, and one that drops a message; the real judges' templates
agree with their full render on every prompt of a TTCW-like batch."""
from __future__ import annotations

from litjudge.engine.backends.local.render import CHECKS, PromptRenderer
from litjudge.engine.core.requests import Message


class Template:
    """A stand-in tokenizer whose chat template is a Python function."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        self.calls += 1
        return self.fn(messages) + ("<|assistant|>" if add_generation_prompt else "")


def plain(messages):
    return "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in messages)


def trims(messages):
    return "".join(f"<|{m['role']}|>{m['content'].strip()}<|end|>" for m in messages)


def drops_system(messages):
    return "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in messages if m["role"] != "system")


def renders(fn, texts, roles=("user",)):
    tok = Template(fn)
    r = PromptRenderer(tok, chat=True)
    got = [r.render(tuple(Message(role, t) for role in roles), "Verdict:") for t in texts]
    want = [fn([{"role": role, "content": t} for role in roles]) + "<|assistant|>Verdict:" for t in texts]
    return got, want, tok.calls


def test_a_faithful_template_is_filled_after_its_checks():
    texts = [f"  story {i}\n" for i in range(50)]
    got, want, calls = renders(plain, texts)
    assert got == want
    assert calls == CHECKS + 1                       # CHECKS full renders + the one with placeholders, then filled


def test_a_template_that_changes_the_text_is_always_rendered_in_full():
    texts = [f"  story {i}\n" for i in range(50)]
    got, want, calls = renders(trims, texts)
    assert got == want and calls > 50
    got, want, calls = renders(drops_system, texts, roles=("system", "user"))
    assert got == want and calls >= 50


def test_the_real_judges_fill_exactly_what_they_render():
    from litjudge.engine.backends.local.models import resolve_judge
    from litjudge.engine.backends.local.render import load_renderer

    for name in ("smollm2-135m",):
        j = resolve_judge(name)
        r = load_renderer(j.path, j.chat)
        texts = [f"Story:\n{'word ' * i}\n\nBackground:\n  x\n\nQuestion {i}?" for i in range(20)]
        fast = [r.render((Message("user", t),)) for t in texts]
        slow = [r._template((Message("user", t),), False) for t in texts]
        assert fast == slow
        assert [list(ids) for ids in r.encode_batch(fast)] == [r.encode(x) for x in fast]   # pieces joined = whole
