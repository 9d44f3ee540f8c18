"""The step model's constants file: its format, and that every constant says where it comes from."""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError
from kvplan.perf.constants import FORMAT, parse_constants, shipped_constants

FITTED_SOURCE = "fitted on the fit split of tests/golden/speed_cases, bench/speed_errors.py --fit"


def test_every_shipped_constant_has_a_source():
    constants = shipped_constants()
    assert constants.values, "the shipped file names no constant"
    for name, source in constants.sources.items():
        assert source.strip(), name
        # A fitted constant says so in the agreed words, so a reader can find the fit.
        if "fitted on" in source:
            assert FITTED_SOURCE in source, name


def test_every_engine_constant_has_a_fallback():
    constants = shipped_constants()
    for name in constants.values:
        if "." in name:
            assert f"{name.split('.')[0]}.other" in constants.values, name


def _doc(**constants):
    return {"format": FORMAT, "constants": constants}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"format": "other/1"}, "format: must be 'kvplan-perf-constants/1'"),
        (_doc(gemm_compute_fraction={"value": 0.5}), "needs exactly `value` and `source`"),
        (_doc(gemm_compute_fraction={"value": 0.5, "source": " "}), "source: every constant"),
        (_doc(gemm_compute_fraction={"value": 1.5, "source": "x"}), "out of range"),
        (_doc(kernel_overhead_s={"value": -1e-6, "source": "x"}), "out of range"),
        (_doc(kernel_overhead_s={"value": "fast", "source": "x"}), "'fast' is not a finite"),
        (_doc(Bad={"value": 1, "source": "x"}), "constants.Bad: not a constant name"),
        ({"format": FORMAT, "bands": {"speed": {}}}, "bands.speed: unknown metric"),
    ],
)
def test_a_bad_constants_file_is_one_line_naming_the_field(doc, message):
    with pytest.raises(KvplanError) as error:
        parse_constants(doc, "cal.yaml")
    assert str(error.value).startswith("cal.yaml: ")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_calibration_file_replaces_only_what_it_names():
    shipped = shipped_constants()
    calibration = parse_constants(
        _doc(gemm_compute_fraction={"value": 0.42, "source": "measured"}), "cal.yaml"
    )
    merged = shipped.with_overrides(calibration)
    assert merged.value("gemm_compute_fraction") == 0.42
    assert merged.sources["gemm_compute_fraction"] == "measured"
    assert merged.value("gemm_bandwidth_fraction") == shipped.value("gemm_bandwidth_fraction")
    unknown = parse_constants(_doc(made_up_s={"value": 1, "source": "x"}), "cal.yaml")
    with pytest.raises(KvplanError, match="made_up_s: not a step-model constant"):
        shipped.with_overrides(unknown)


def test_a_constant_says_fitted_exactly_when_the_fit_changes_it():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from speed_errors import FITTED

    claimed = {n for n, s in shipped_constants().sources.items() if FITTED_SOURCE in s}
    assert claimed == set(FITTED)


def test_the_bands_come_from_the_test_split():
    bands = shipped_constants().bands
    assert set(bands) <= {"output_tokens_per_s", "itl_ms", "ttft_ms", "latency_s"}
    for band in bands.values():
        assert 0 <= band.median_abs_log_ratio <= band.worst_abs_log_ratio
        assert band.cases >= 1 and "test split" in band.source
