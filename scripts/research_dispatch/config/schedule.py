"""The six-monthly schedule: when the next cycle runs, and when GitHub pauses it for inactivity.

Why this matters enough for a module: GitHub disables the scheduled workflows of a public repository
after 60 days without activity, and a six-monthly cron always crosses that gap. Keep-alive actions and
dummy commits are what GitHub sanctioned (ci-conventions §5.3), so the product never ships one; instead
it tells the lead, where they look and in time, the date by which the schedule pauses and the one
command that re-enables it: `init`'s next steps, every refresh PR body, and `check --online` (which also
reads the workflow's state from GitHub). All of them compute the dates here, from the schedule file's
own cron lines, so a repository that changed its cron is told its own dates.

Pure functions over the cron text and dates; the only I/O is reading the schedule workflow file.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from research_dispatch.config.plan import current_cycle

SCHEDULE_WORKFLOW = "research-refresh-schedule.yml"
SCHEDULE_PATH = f".github/workflows/{SCHEDULE_WORKFLOW}"
DEFAULT_CRON = "17 6 1 1,7 *"
INACTIVITY_DAYS = 60
"""GitHub: "In a public repository, scheduled workflows are automatically disabled when no repository
activity has occurred in 60 days." (ci-conventions §5.2)"""
ENABLE_COMMAND = f"gh workflow enable {SCHEDULE_WORKFLOW}"
SEARCH_YEARS = 5
"""How far ahead `next_run` looks for a matching day (a cron like `0 0 29 2 1` fires rarely)."""

_FIELDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_NAMES: tuple[dict[str, int], ...] = ({}, {}, {},
          {name: index + 1 for index, name in enumerate(
              ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))},
          {name: index for index, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))})
_PART = re.compile(r"^(?P<range>\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(?P<step>\d+))?$")


class CronError(ValueError):
    """A cron expression this module cannot read (GitHub's own check, actionlint, would refuse it too)."""


@dataclass(frozen=True)
class Cron:
    """A five-field POSIX cron expression, as GitHub reads it (UTC)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # the day-of-month field is `*`
    any_weekday: bool  # the day-of-week field is `*`

    def runs_on(self, day: dt.date) -> bool:
        """POSIX: when both day fields are restricted, a day matching either runs."""
        if day.month not in self.months:
            return False
        by_day = day.day in self.days
        by_weekday = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return by_day and by_weekday
        return by_day or by_weekday


def _values(text: str, index: int) -> frozenset[int]:
    low, high = _FIELDS[index]
    values: set[int] = set()
    for part in text.lower().split(","):
        match = _PART.match(part)
        if match is None:
            raise CronError(f"cannot read {text!r}")
        if match["range"] == "*":
            start, end = low, high
        else:
            bounds = [_number(item, index) for item in match["range"].split("-")]
            start, end = bounds[0], bounds[-1]
        step = int(match["step"] or 1)
        if not (low <= start <= end <= high + (1 if index == 4 else 0)) or step < 1:
            raise CronError(f"{text!r} is out of range")
        values.update(value % 7 if index == 4 else value for value in range(start, end + 1, step))
    return frozenset(values)


def _number(item: str, index: int) -> int:
    if item in _NAMES[index]:
        return _NAMES[index][item]
    if not item.isdigit():
        raise CronError(f"cannot read {item!r}")
    return int(item)


def parse_cron(text: str) -> Cron:
    fields = text.split()
    if len(fields) != 5:
        raise CronError(f"{text!r} does not have five fields")
    minutes, hours, days, months, weekdays = (_values(value, index) for index, value in enumerate(fields))
    return Cron(minutes, hours, days, months, weekdays, any_day=fields[2] == "*", any_weekday=fields[4] == "*")


def next_run(crons: Iterable[str], after: dt.datetime) -> dt.datetime | None:
    """The first moment after `after` (UTC) at which any of the cron expressions fires; None if none does
    within `SEARCH_YEARS`, or if no expression can be read."""
    parsed = []
    for text in crons:
        try:
            parsed.append(parse_cron(text))
        except CronError:
            continue
    after = after.astimezone(dt.timezone.utc).replace(second=0, microsecond=0)
    found: list[dt.datetime] = []
    for cron in parsed:
        day = after.date()
        for _ in range(366 * SEARCH_YEARS):
            if cron.runs_on(day):
                times = [dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.timezone.utc)
                         for hour in sorted(cron.hours) for minute in sorted(cron.minutes)]
                later = [moment for moment in times if moment > after]
                if later:
                    found.append(later[0])
                    break
            day += dt.timedelta(days=1)
    return min(found) if found else None


def pause_date(last_activity: dt.date) -> dt.date:
    """The day GitHub pauses the schedule if nothing happens in the repository after `last_activity`."""
    return last_activity + dt.timedelta(days=INACTIVITY_DAYS)


def read_crons(repo: Path) -> tuple[str, ...]:
    """The cron lines of the repository's schedule workflow; the default one when the file cannot be read
    (init has not written it yet), and none when it has no `schedule` trigger."""
    path = repo / SCHEDULE_PATH
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return (DEFAULT_CRON,)
    if not isinstance(data, dict):
        return (DEFAULT_CRON,)
    triggers = data.get("on", data.get(True))  # YAML 1.1 reads the key `on` as true
    entries = triggers.get("schedule") if isinstance(triggers, dict) else None
    if not isinstance(entries, list):
        return ()
    return tuple(str(entry["cron"]) for entry in entries if isinstance(entry, dict) and entry.get("cron"))


@dataclass(frozen=True)
class Outlook:
    """What a lead needs to keep the schedule alive: the next cycle, and when it pauses without activity."""

    next_run: dt.datetime | None
    last_activity: dt.date
    pauses_on: dt.date

    @property
    def pauses_first(self) -> bool:
        """The schedule pauses before its next run: without activity, that run will not happen."""
        return self.next_run is None or self.pauses_on <= self.next_run.date()

    def next_cycle(self) -> str:
        if self.next_run is None:
            return "no further run (the cron never fires)"
        return f"{current_cycle(self.next_run)}, on {self.next_run:%Y-%m-%d %H:%M} UTC"


def outlook(crons: Sequence[str], last_activity: dt.date, now: dt.datetime) -> Outlook:
    return Outlook(next_run(crons, now), last_activity, pause_date(last_activity))
