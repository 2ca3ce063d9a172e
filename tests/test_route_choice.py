"""How `tdev route tune` chooses between backends from its measurements: the spread of every
figure is shown, and a backend wins only when it is faster by more than the noise."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tdev.route.cases import Case
from tdev.route.report import format_table, notes
from tdev.route.timing import Timing
from tdev.route.tune import MIN_GAIN, Measurement, TuneResult, choose


def _timing(samples) -> Timing:
    ordered = sorted(samples)
    return Timing(ordered[len(ordered) // 2], tuple(samples), 10, "events")


def _result(per_backend: dict[str, list[float]], calls: int = 1) -> TuneResult:
    case = Case("add.Tensor", ({"shape": [256]}, {"shape": [256]}), {}, calls)
    ms = [Measurement(case, b, _timing(s)) for b, s in per_backend.items()]
    r = TuneResult("torch_sim", "sim:0", "2.6.0", "events", len(next(iter(per_backend.values()))), ms)
    r.choices = [choose("add.Tensor", ms)]
    return r


def test_a_tenth_of_a_percent_is_not_a_winner_and_the_spread_is_shown():
    r = _result({"vendor": [10.00, 10.02, 9.98, 10.05, 9.95], "flaggems": [9.99, 10.01, 9.97, 10.04, 9.94]})
    (c,) = r.choices
    assert c.backend == "vendor" and c.within_noise == ("vendor", "flaggems")  # listed first, kept
    table = format_table(r)
    assert "±" in table.splitlines()[1] and "vendor (tie)" in table
    assert notes(r) == ["add.Tensor: vendor and flaggems are within noise of each other "
                        "(vendor 10.00 us [9.98-10.02], flaggems 9.99 us [9.97-10.01]); kept vendor, "
                        "listed first in --backends"]
    assert "add.Tensor = vendor    # within noise: flaggems 10.0 [10.0-10.0], vendor 10.0 [10.0-10.0]" \
        in r.conf_text()


def test_a_clear_difference_wins():
    r = _result({"vendor": [10.0, 10.1, 9.9, 10.2, 9.8], "flaggems": [7.0, 7.1, 6.9, 7.2, 6.8]})
    (c,) = r.choices
    assert c.backend == "flaggems" and c.within_noise == ()
    assert "flaggems (tie)" not in format_table(r) and notes(r) == []
    assert "add.Tensor = flaggems    # flaggems 7.0 [6.9-7.1], vendor 10.0 [9.9-10.1]" in r.conf_text()


@settings(max_examples=200, deadline=None)
@given(base=st.floats(1.0, 1e4), noise=st.lists(st.floats(-0.3, 0.3), min_size=3, max_size=15),
       factor=st.floats(0.2, 5.0))
def test_a_winner_is_faster_by_more_than_the_noise(base, noise, factor):
    """Whatever the figures: a backend chosen over another is faster by at least MIN_GAIN and
    its middle half of batches lies below the other's; otherwise the first listed is kept."""
    a = [base * (1 + n) for n in noise]
    b = [x * factor for x in a]
    r = _result({"vendor": a, "flaggems": b})
    (c,) = r.choices
    lo, hi = c.spread_us["vendor"], c.spread_us["flaggems"]
    if c.within_noise:
        assert c.backend == "vendor"
    else:
        win, lose = (c.backend, "flaggems" if c.backend == "vendor" else "vendor")
        assert c.totals_us[lose] >= c.totals_us[win] * (1 + MIN_GAIN)
        assert c.spread_us[win][1] < c.spread_us[lose][0]
    assert lo[0] <= c.totals_us["vendor"] <= lo[1] and hi[0] <= c.totals_us["flaggems"] <= hi[1]
