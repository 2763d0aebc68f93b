"""frontier.traps: each defence catches its trap, is off at 0, and spares look-alikes."""

from __future__ import annotations

import pytest

from frontier.traps import (
    EARLIEST_YEAR,
    TRAP_REASONS,
    calendar_trap,
    path_depth_trap,
    query_params_trap,
    repeated_segments_trap,
    split_url,
    trap_reason,
)

NOW = 2026
DEFAULTS = {"max_path_segments": 24, "max_segment_repeats": 2, "max_query_params": 8,
            "calendar_window_years": 2, "now_year": NOW}


def reason(url: str, **over: int) -> str | None:
    return trap_reason(url, **{**DEFAULTS, **over})


def test_split_url() -> None:
    assert split_url("https://e.com/a/b?x=1&y=2") == ("/a/b", "x=1&y=2")
    assert split_url("http://e.com:8080/") == ("/", "")
    assert split_url("http://e.com") == ("/", "")
    assert split_url("http://e.com/p?") == ("/p", "")


# --- path depth ---------------------------------------------------------------------------

def test_path_depth() -> None:
    deep = "https://e.com/" + "/".join(f"d{i}" for i in range(25))
    ok = "https://e.com/" + "/".join(f"d{i}" for i in range(24)) + "/"
    assert reason(deep) == "trap_path_depth"
    assert reason(ok) is None  # 24 segments; the trailing slash adds none
    assert reason(deep, max_path_segments=0) is None
    assert path_depth_trap("/a/b/c/d", 3) == "trap_path_depth"
    assert path_depth_trap("/a/b/c/", 3) is None
    assert path_depth_trap("/a//b/c", 3) == "trap_path_depth"  # empty segments count


# --- repeated segments --------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/a/a/a/",                  # one segment, 3 copies in a row
    "/a/b/a/b/a/b/",            # a run of 2, 3 copies
    "/x/y/z/x/y/z/x/y/z",       # a run of 3, 3 copies
    "/top/a/b/a/b/a/b/page.html",
    "/en/x/en/y/en/z/en/",      # 4 occurrences anywhere (> R + 1)
    "/a/1/a/1/a/1/",            # a block mixing a name and a number still counts
])
def test_repeated_segments_caught(path: str) -> None:
    assert reason("https://e.com" + path) == "trap_repeated_segments"
    assert reason("https://e.com" + path, max_segment_repeats=0) is None


@pytest.mark.parametrize("path", [
    "/2024/01/01/",                     # dates
    "/2024/01/01/new-year/",
    "/en/docs/en/",                     # twice
    "/a/a/",                            # one repeat
    "/a/b/a/b/",                        # a run repeated twice
    "/a/b/a/b/a/",                      # 2.5 copies
    "/i/1423529/40875/0/0/0",           # numbers: path-encoded parameters (realpages)
    "/r/1/2/1/2/1/2/",                  # a numeric block
    "/x/1/y/1/z/1/w/1/",                # a number four times
    "/en/a/en/b/en/",                   # three times, not in a row: R + 1 allowed
])
def test_repeated_segments_spared(path: str) -> None:
    assert reason("https://e.com" + path) is None


def test_repeated_segments_threshold_follows_setting() -> None:
    assert repeated_segments_trap("/a/a/", 1) == "trap_repeated_segments"
    assert repeated_segments_trap("/a/a/a/", 3) is None
    assert repeated_segments_trap("/a/a/a/a/", 3) == "trap_repeated_segments"
    assert repeated_segments_trap("/a/b/a/b/a/b/a/b/", 3) == "trap_repeated_segments"


# --- query parameters ----------------------------------------------------------------------

def test_query_params() -> None:
    nine = "https://e.com/s?" + "&".join(f"f{i}=1" for i in range(9))
    eight = "https://e.com/s?" + "&".join(f"f{i}=1" for i in range(8))
    assert reason(nine) == "trap_query_params"
    assert reason(eight) is None
    assert reason(nine, max_query_params=0) is None
    assert query_params_trap("a=1&&b=2&&c", 3) is None  # empty items do not count
    assert query_params_trap("a&b&c&d", 3) == "trap_query_params"


# --- calendar ---------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "https://e.com/calendar/2031/05/",
    "https://e.com/calendar/2031/05",
    "https://e.com/events/2031-05-17",
    "https://e.com/events/concert-2031-05-17.html",
    "https://e.com/c?year=2031&month=5",
    "https://e.com/c?YEAR=2031",
    "https://e.com/c?date=20310517",
    "https://e.com/c?view=month&eventDate=203105",
    "https://e.com/c?month=2031-05",
    "https://e.com/events/month/2127-04/",
    "https://e.com/archive/1542/03/",       # backwards, before EARLIEST_YEAR
    "https://e.com/c?day=19690720",
])
def test_calendar_caught(url: str) -> None:
    assert reason(url) == "trap_calendar"
    assert reason(url, calendar_window_years=0) is None


@pytest.mark.parametrize("url", [
    "https://e.com/2028/12/31/post/",                 # inside the window (now + 2)
    "https://e.com/2019/05/old-post/",                # archives of past years are content
    "https://e.com/blog/1995/07/a-post.html",
    "https://e.com/c?year=2027&month=12",
    "https://e.com/c?date=20260101",
    "https://e.com/threads/2500/3/",                  # unpadded: thread 2500, page 3
    "https://e.com/status/1454931184966770696",       # long ids
    "https://e.com/aff_c?offer_id=78&aff_id=1169",    # a small number, not a date
    "https://e.com/p/r~26c2381a57d611ea8362ac1f6b220ee8/",
    "https://e.com/item/20310517",                    # 8 digits in a path: an id
    "https://e.com/c?id=20310517",                    # not a date key
    "https://e.com/products/12031-05",                # the year does not start the number
])
def test_calendar_spared(url: str) -> None:
    assert reason(url) is None


def test_calendar_window_moves_with_now() -> None:
    path, query = "/cal/2031/05/", ""
    assert calendar_trap(path, query, 2, 2026) == "trap_calendar"
    assert calendar_trap(path, query, 2, 2029) is None
    assert calendar_trap(path, query, 5, 2026) is None
    assert calendar_trap(f"/blog/{EARLIEST_YEAR}/01/post/", "", 2, 2026) is None
    assert calendar_trap(f"/blog/{EARLIEST_YEAR - 1}/12/post/", "", 2, 2026) == "trap_calendar"


def test_past_calendar_views_are_bounded_but_old_articles_are_not() -> None:
    """A calendar paging backwards gives date-terminal URLs: within W years of now only."""
    assert calendar_trap("/cal/2024/05/", "", 2, 2026) is None
    assert calendar_trap("/cal/2023/12/", "", 2, 2026) == "trap_calendar"
    assert calendar_trap("/cal/2019/05/17/", "", 2, 2026) == "trap_calendar"
    assert calendar_trap("/cal", "year=2019&month=05", 2, 2026) == "trap_calendar"
    assert calendar_trap("/2019/05/17/some-story.html", "", 2, 2026) is None
    assert calendar_trap("/cal/2019/05/", "", 0, 2026) is None


def test_ordinary_urls_pass() -> None:
    for url in ("https://e.com/", "https://www.nytimes.com/2024/05/17/world/europe/x.html",
                "https://en.wikipedia.org/wiki/Calendar?action=history",
                "https://e.com/search?q=a&page=2&sort=new"):
        assert reason(url) is None, url


def test_reasons_listed() -> None:
    assert set(TRAP_REASONS) == {"trap_path_depth", "trap_repeated_segments",
                                 "trap_query_params", "trap_calendar"}
