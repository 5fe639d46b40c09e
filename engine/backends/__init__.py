"""Every backend, in one registry: name -> class (lazy "module:Class", so importing litjudge never
imports vLLM or torch), with the judge-name prefix that selects it. Choosing a backend is a lookup
here and nowhere else; a new backend is one file plus one line below.

Each registered class has the same factory shape: `resolve(name, config) -> JudgeSpec` (once, at
the edge), `create(spec)` (start it for generation), `plan(spec)` (an engine-free planner), and
`capabilities` (the verdict modes it serves, checked before anything runs).
"""
from __future__ import annotations

from .factory import backend_named, backend_of, check_mode, create, model_spec, planner, resolve
from .registry import BACKENDS, PLAIN

__all__ = ["BACKENDS", "PLAIN", "backend_named", "backend_of", "check_mode", "create", "model_spec", "planner", "resolve"]
