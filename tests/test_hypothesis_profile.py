"""Every property test draws the same cases on every run and keeps no example database (the
profile tests/conftest.py loads): a settings object made before the profile loads would not
inherit it, and a test of its own `@seed` or database would draw differently from run to run."""
import importlib

from hypothesis import settings

from tests.conftest import PROJECT_ROOT


def test_every_property_test_draws_the_same_cases_and_keeps_no_database():
    assert settings.default.derandomize and settings.default.database is None
    modules = [p.stem for p in sorted((PROJECT_ROOT / "tests").glob("test_*.py"))
               if "hypothesis" in p.read_text(encoding="utf-8") and p.stem != "test_hypothesis_profile"]
    found = []
    for name in modules:
        for obj in vars(importlib.import_module(f"tests.{name}")).values():
            if getattr(obj, "is_hypothesis_test", False):
                s = obj._hypothesis_internal_use_settings
                found.append(f"{name}.{obj.__name__}")
                assert s.derandomize and s.database is None, found[-1]
                assert obj._hypothesis_internal_use_seed is None, found[-1]
    assert len(found) >= 30, found          # 34 when written
