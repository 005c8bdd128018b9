import pytest

from launchkit.core.units import format_size, parse_duration, parse_size, to_nanoseconds


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("90", 90),
        ("30s", 30),
        ("5m", 300),
        ("2h30m", 9000),
        ("1d", 86400),
        ("1h30m15s", 5415),
        ("1.5h", 5400),
        ("500ms", 0.5),
        ("2w", 1209600),
        (" 10M ", 600),
        (45, 45),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "h", "1h30", "-5m", "5 m", "m5", "1d-1h", "soon"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    "text,size",
    [
        ("512MiB", 512 * 2**20),
        ("10GiB", 10 * 2**30),
        ("10.24gb", 10_240_000_000),
        ("1000", 1000),
        ("2.5GiB", int(2.5 * 2**30)),
        ("64G", 64 * 10**9),
        ("1TiB", 2**40),
        ("3 kb", 3000),
    ],
)
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "GiB", "10GX", "-1GiB", "0", "ten", "1.2.3GB"])
def test_bad_sizes(text):
    with pytest.raises(ValueError):
        parse_size(text)


@pytest.mark.parametrize("size,text", [(10 * 2**30, "10GiB"), (10_240_000_000, "10240MB"), (123, "123")])
def test_format_size_is_exact(size, text):
    assert format_size(size) == text
    assert parse_size(text) == size


def test_nanoseconds():
    assert to_nanoseconds(parse_duration("5m")) == 300_000_000_000
