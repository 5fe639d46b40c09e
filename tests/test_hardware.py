"""The dtype follows the hardware: `dtype = "auto"` is bfloat16 on a GPU and on a CPU with fast bf16
matrix products (AMX, AMD's AVX-512 BF16), float32 on one without (AVX2 only, where vLLM-CPU would
fall back to torch's slow bf16 kernel; an Intel Xeon whose AMX is hidden, where float32 was
measured faster); an explicit dtype wins. The chosen dtype names the key family
(float32 keys never mix with bfloat16 ones) and the manifest says which ran and why."""
from __future__ import annotations

import pytest

from litjudge.engine.backends import hardware
from litjudge.engine.backends.base import key_family
from litjudge.engine.backends.hardware import AMD, INTEL, choose_dtype, onednn_fell_back

SAPPHIRE_RAPIDS = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})   # Intel Xeon with AMX
GENOA = frozenset({"avx2", "avx512f", "avx512_bf16"})                                      # AMD EPYC Zen 4/5
MILAN = frozenset({"avx2", "fma"})                                                         # AMD EPYC Zen 3: AVX2 only
SKYLAKE = frozenset({"avx2", "avx512f"})                                                   # AVX-512 without BF16
EMERALD_RAPIDS_NO_AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "avx512_fp16"})         # Intel Xeon, AMX hidden (a VM)


@pytest.mark.parametrize("flags, vendor, dtype, why", [
    (SAPPHIRE_RAPIDS, INTEL, "bfloat16", "amx_bf16"),
    (GENOA, AMD, "bfloat16", "avx512_bf16, AMD"),
    (EMERALD_RAPIDS_NO_AMX, INTEL, "float32", "avx512_bf16 without AMX on a GenuineIntel CPU"),
    (GENOA, "", "float32", "without AMX on a non-AMD CPU"),
    (MILAN, AMD, "float32", "no bf16 instructions"),
    (SKYLAKE, INTEL, "float32", "no bf16 instructions"),
])
def test_auto_follows_the_cpu(flags, vendor, dtype, why):
    choice = choose_dtype("auto", flags, gpu=False, vendor=vendor)
    assert choice.dtype == dtype and why in choice.reason


def test_a_gpu_runs_bfloat16_and_an_explicit_dtype_wins():
    assert choose_dtype("auto", MILAN, gpu=True).dtype == "bfloat16"
    for explicit in ("bfloat16", "float16", "float32"):
        for flags in (SAPPHIRE_RAPIDS, MILAN):
            choice = choose_dtype(explicit, flags, gpu=False)
            assert choice.dtype == explicit and choice.reason == "set in the config"


def test_the_chosen_dtype_names_the_key_family(monkeypatch):
    """The same config on an AVX2 machine and on an AMX machine plans different keys (float32 vs
    bfloat16): their verdicts are never mixed in one store."""
    from litjudge.engine import backends
    from litjudge.engine.backends import factory
    from litjudge.engine.core.config import RunConfig
    from litjudge.engine.core.schema import build

    config = build(RunConfig, {"name": "d", "protocol": "ttcw", "dataset": "ttcw-demo"}, "test")
    specs = {}
    for label, flags in (("amx", SAPPHIRE_RAPIDS), ("avx2", MILAN)):
        monkeypatch.setattr(hardware, "cpu_flags", lambda flags=flags: flags)
        monkeypatch.setattr(hardware, "gpu_present", lambda: False)
        monkeypatch.setattr(factory, "_SPECS", {})
        specs[label] = backends.resolve("smollm2-135m", config)
    assert specs["amx"].engine.dtype == "bfloat16" and specs["amx"].family == key_family("vllm", "bfloat16") == "vllm"
    assert specs["avx2"].engine.dtype == "float32" and specs["avx2"].family == "vllm-float32"
    assert "no bf16 instructions" in specs["avx2"].detail("dtype_reason")
    assert specs["amx"].fingerprint == specs["avx2"].fingerprint             # the same weights, other numbers


def test_the_onednn_fallback_is_read_from_the_engine_log(tmp_path):
    log = tmp_path / "engine.log"
    assert onednn_fell_back(None) is None and onednn_fell_back(log) is None
    log.write_text("INFO loading\nWARNING Failed to create oneDNN linear, fallback to torch linear\n")
    assert onednn_fell_back(log) is True
    log.write_text("INFO loading\n")
    assert onednn_fell_back(log) is False
