"""Your own prompt template, for every protocol: `template = "path/or/inline"` at the top of a run
config (or of a task, or a sweep's `[matrix] template` axis; a rubric question may carry its own).

A template is the user message the judge reads; the judge's chat template wraps it as it wraps the
built-in prompts. It names the protocol's fields in braces (`{story}`, `{question}`, `{text_a}`...).
Escape rule: `{{` and `}}` are a literal brace (as in Python's str.format); anything else in braces
is a field name. Fields are filled by plain substitution, once: judged text holding braces is text.

Why top-level and not `options.template`: the fields a template may name differ per protocol, but
the key means the same thing for every protocol (so the framework checks it once, before any model
loads), and the protocols' own `options.template` already names their built-in templates
(pairwise's LitBench names, classification's "paper"). A value with a newline or a `{field}` is
inline text; otherwise it is a file's path, relative to the config file's folder.

Checked when the options are built (`litjudge run`, `plan`, every sweep cell): a field the protocol
does not provide, or a field it requires left out (the fields that tell one ask from another: a TTCW
template without `{question}` would make a story's 14 tests one prompt and one verdict), is one line
naming it and listing the fields the protocol provides. The template's text reaches the content key
through the prompt it makes (a custom template changes the keys and nothing else) and the run's
manifest (`template`: where, sha256, text).
"""
from __future__ import annotations

import hashlib
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from litjudge.engine.core.config import source_folder
from litjudge.engine.core.errors import ConfigError, did_you_mean

ESCAPE = "write {{ or }} for a literal brace"


@dataclass(frozen=True)
class TemplateFields:
    """What a protocol offers a template: the fields it fills (`provided`) and those a template must
    name (`required`: without them, distinct asks would be one prompt and share one verdict)."""

    provided: tuple[str, ...]
    required: tuple[str, ...] = ()

    def listed(self) -> str:
        return ", ".join("{" + f + "}" for f in self.provided)


@dataclass(frozen=True)
class Template:
    """A parsed template: where it came from (a path, or "inline"), its text, and its pieces:
    (literal text, field name or None) in order."""

    source: str
    text: str
    pieces: tuple[tuple[str, str | None], ...]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for _, name in self.pieces if name is not None))

    def render(self, values: Mapping[str, Any]) -> str:
        """The template with each field replaced by its value's text, in one pass (a value holding
        braces stays as it is)."""
        return "".join(literal + ("" if name is None else str(values[name])) for literal, name in self.pieces)

    def record(self) -> dict[str, str]:
        """What the manifest keeps of it."""
        return {"source": self.source, "sha256": hashlib.sha256(self.text.encode()).hexdigest(), "text": self.text}


def parse(text: str, source: str, where: str, key: str) -> Template:
    """A template's text -> its pieces; braces that are not a plain `{name}` are one line."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ConfigError(f"{_at(source, text, _lone_brace(text))}the template has an unmatched brace ({exc}); {ESCAPE}",
                          where=where, parameter=key) from None
    pieces = []
    for literal, name, spec, conversion in parts:
        if name is not None and (not name.isidentifier() or spec or conversion):
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise ConfigError(f"{_at(source, text, text.find(shown))}{shown} is not a field: a field is a plain name "
                              f"in braces, e.g. {{story}}; {ESCAPE}", where=where, parameter=key)
        pieces.append((literal, name))
    if not any(name for _, name in pieces):
        raise ConfigError("the template names no field, so every ask would be the same prompt: name the texts "
                          "judged, e.g. {story} or {text}", where=where, parameter=key)
    return Template(source, text, tuple(pieces))


def _at(source: str, text: str, position: int) -> str:
    """Where in a template file an error is ("" for an inline template: the config names it)."""
    if source == "inline":
        return ""
    line = f", line {text.count(chr(10), 0, position) + 1}" if position >= 0 else ""
    return f"template file {source!r}{line}: "


def _lone_brace(text: str) -> int:
    """The position of the first brace that opens no field and is not doubled (-1: none found)."""
    i = 0
    while i < len(text):
        if text[i:i + 2] in ("{{", "}}"):
            i += 2
        elif text[i] == "{":
            end = text.find("}", i)
            if end < 0:
                return i
            i = end + 1
        elif text[i] == "}":
            return i
        else:
            i += 1
    return -1


def is_inline(spec: str) -> bool:
    return "\n" in spec or "{" in spec


def read(spec: str, base: Path, where: str, key: str) -> Template:
    """A template given as inline text or as a file's path (relative to `base`, the config's folder)."""
    if is_inline(spec):
        return parse(spec, "inline", where, key)
    path = Path(spec).expanduser()
    path = path if path.is_absolute() else base / path
    try:
        stat = path.stat()
    except OSError:
        # a name like a file's (a folder or a suffix in it) was meant as one: no word of inline templates
        hint = "" if "/" in spec or Path(spec).suffix else \
            " (an inline template names a field in braces, e.g. {story})"
        raise ConfigError(f"template file {str(path)!r} not found{hint}", where=where, parameter=key) from None
    return _read_file(str(path.resolve()), stat.st_mtime_ns, stat.st_size, where, key)


@lru_cache(maxsize=64)
def _read_file(path: str, mtime: int, size: int, where: str, key: str) -> Template:
    """A template file, read once per version (a protocol asks for it once per unit)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"template file {path!r} cannot be read as UTF-8 text ({exc.__class__.__name__})",
                          where=where, parameter=key) from None
    return parse(text, path, where, key)


def config_base(config: Any) -> Path:
    """The folder a config's relative template paths start from: the config file's, else the cwd."""
    return source_folder(getattr(config, "source", "") or "")


def template_of(config: Any) -> Template | None:
    """The run's own template (`template = ...`), or None: the protocol's built-in prompt."""
    if not config.template:
        return None
    return read(config.template, config_base(config), config.source or "config", "template")


def checked(template: Template, fields: TemplateFields | None, protocol: str, where: str, key: str) -> Template:
    """`template`, if every field it names is one the protocol provides and it names every required one."""
    if fields is None:
        raise ConfigError(f"protocol {protocol!r} takes no prompt template of yours", where=where, parameter=key)
    unknown = [f for f in template.fields if f not in fields.provided]
    if unknown:
        near = unknown[0].lower() if unknown[0].lower() in fields.provided else unknown[0]      # {TEXT_B}: {text_b}
        close = did_you_mean(near, fields.provided, form=lambda f: "{" + f + "}")   # as a template writes it
        at = _at(template.source, template.text, template.text.find("{" + unknown[0] + "}"))
        raise ConfigError(f"{at}unknown field {{{unknown[0]}}}{close}; protocol {protocol!r} provides "
                          f"{fields.listed()} ({ESCAPE})", where=where, parameter=key)
    missing = [f for f in fields.required if f not in template.fields]
    if missing:
        raise ConfigError(f"{_at(template.source, template.text, -1)}the template leaves out {{{missing[0]}}}, which "
                          "tells one ask from another; protocol "
                          f"{protocol!r} provides {fields.listed()} and needs "
                          + ", ".join("{" + f + "}" for f in fields.required), where=where, parameter=key)
    return template
