"""Unit tests for harness.common.quantity: Kubernetes quantity strings to exact milli-units and back.

Expected values follow k8s.io/apimachinery/pkg/api/resource/quantity.go (ParseQuantity, MilliValue).
"""

from __future__ import annotations

import pytest

from harness.common.quantity import format_milli, parse_quantity

GI = 2**30


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("0", 0),
        ("1", 1000),
        ("0.5", 500),
        ("1.5", 1500),
        (".5", 500),
        ("1.", 1000),
        ("+2", 2000),
        ("-1", -1000),
        ("  3  ", 3000),
    ],
)
def test_plain_numbers(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    ("text", "milli"),
    [("500m", 500), ("1m", 1), ("1500m", 1500), ("0m", 0), ("1500u", 2), ("1n", 1), ("2000000n", 2)],
)
def test_milli_and_smaller_suffixes(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("1Ki", 1024 * 1000),
        ("1Mi", 2**20 * 1000),
        ("1Gi", GI * 1000),
        ("1.5Gi", 3 * 2**29 * 1000),
        ("1Ti", 2**40 * 1000),
        ("1Pi", 2**50 * 1000),
        ("1Ei", 2**60 * 1000),
    ],
)
def test_binary_suffixes(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("2k", 2 * 10**6),
        ("1M", 10**9),
        ("1G", 10**12),
        ("1T", 10**15),
        ("1P", 10**18),
        ("1E", 10**21),
    ],
)
def test_decimal_suffixes(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    ("text", "milli"),
    [("1e3", 10**6), ("1E3", 10**6), ("1.5e2", 150_000), ("1e-3", 1), ("5e+0", 5000), ("25e-2", 250)],
)
def test_exponent_form(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(("text", "milli"), [("0.1m", 1), ("1.0001", 1001), ("1.5m", 2), ("1e-9", 1)])
def test_fractions_of_a_milli_unit_round_up(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


def test_large_values_stay_exact() -> None:
    assert parse_quantity("123456789012345678901234567890") == 123456789012345678901234567890 * 1000
    assert parse_quantity("9223372036854775807") == (2**63 - 1) * 1000


@pytest.mark.parametrize(("value", "milli"), [(2, 2000), (0, 0), (0.25, 250), (0.1, 100), (1.5, 1500)])
def test_numbers(value: int | float, milli: int) -> None:
    # 0.1 is not exactly representable in binary; it must still be 100m, not 101m.
    assert parse_quantity(value) == milli


@pytest.mark.parametrize(
    "text",
    ["", " ", "abc", "Gi", "1x", "1.2.3", "1e", "1 Gi", "--1", "1Gi1", ".", "e3", "1ki", "1KiB", "0x10"],
)
def test_malformed_strings_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(text)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "1e100", "1e99999999999"])
def test_out_of_range_raises_value_error(value: str | float) -> None:
    with pytest.raises(ValueError):
        parse_quantity(value)


@pytest.mark.parametrize("value", [None, True, ["1"], b"1"])
def test_wrong_types_raise_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        parse_quantity(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("milli", "text"),
    [
        (0, "0"),
        (1000, "1"),
        (500, "500m"),
        (1500, "1500m"),
        (3000, "3"),
        (GI * 1000, "1Gi"),
        (3 * 2**29 * 1000, "1536Mi"),
        (1024 * 1000, "1Ki"),
        (1000 * 1000, "1000"),
        (-500, "-500m"),
        (-2 * GI * 1000, "-2Gi"),
    ],
)
def test_format_milli(milli: int, text: str) -> None:
    assert format_milli(milli) == text


def test_format_milli_decimal_only() -> None:
    assert format_milli(1024 * 1000, binary=False) == "1024"
    assert format_milli(GI * 1000, binary=False) == str(GI)


@pytest.mark.parametrize(
    "milli", [0, 1, 999, 1000, 1001, 123456, GI * 1000, GI * 1000 + 1, 5 * 2**40 * 1000, -7]
)
def test_format_parses_back_exactly(milli: int) -> None:
    assert parse_quantity(format_milli(milli)) == milli
    assert parse_quantity(format_milli(milli, binary=False)) == milli
