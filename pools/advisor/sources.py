"""Where each advisor rule comes from, in words a user reads: the seed article (by the English
name ``/work/shared/seeds/README.md`` gives it), the section's heading translated, and the row of
a table or the numbered habit with what it says; beside the short citation (``004 §5.1 row 1``)
that code comments and the README use. Pure: no ORM.

Headings and rows are translated from the seeds' Chinese (``004…`` §2.3, §4.1, §4.3, §5.1's
six-row table, §5.2's first habit; ``000…`` §5.1-§5.4)."""

from __future__ import annotations

from dataclasses import dataclass

# The seeds' numbers (their file names' prefix) and their English names (seeds/README.md).
ARTICLES = {
    "000": "AI-native compute",
    "004": "Enterprise GPU pools",
}

# (seed, section) -> the section's heading, translated.
SECTIONS = {
    ("004", "2.3"): "Three common mistakes when estimating",
    ("004", "4.1"): "Why agent applications burn through a GPU pool",
    ("004", "4.3"): "Whether the compute is well spent is for observability to say",
    ("004", "5.1"): "Troubleshooting table of frequent problems",
    ("004", "5.2"): "From “not enough compute” to “compute used well”",
    ("000", "5.1"): "Cold starts eat the SLA",
    ("000", "5.2"): "Queue avalanches from traffic spikes",
    ("000", "5.3"): "Memory fragmentation and slowdown over long runs",
    ("000", "5.4"): "Multi-tenant QoS isolation is harder than it looks",
}


@dataclass(frozen=True)
class Passage:
    """One place in a seed: ``seed`` (``"004"``), ``section`` (``"5.1"``) and, within it,
    ``part`` (``"row 1"``, ``"habit 1"``, empty for the whole section) saying ``says``
    (the row's symptom or the habit, translated; empty for a whole section)."""

    seed: str
    section: str
    part: str = ""
    says: str = ""

    def citation(self, *, same_seed: bool = False) -> str:
        """``004 §5.1 row 1``; ``§4.1`` alone after a passage of the same seed."""
        short = f"§{self.section}" + (f" {self.part}" if self.part else "")
        return short if same_seed else f"{self.seed} {short}"

    @property
    def words(self) -> str:
        """``Enterprise GPU pools, §5.1 “Troubleshooting table of frequent problems”, row 1:
        GPU utilisation is low but requests queue badly``. Raises ``KeyError`` for a seed or
        section not listed above (a test reads every rule's)."""
        text = f"{ARTICLES[self.seed]}, §{self.section} “{SECTIONS[(self.seed, self.section)]}”"
        if self.part:
            text += f", {self.part}"
        return text + (f": {self.says}" if self.says else "")


def citation(passages: tuple[Passage, ...]) -> str:
    """The passages' short citations, the seed named once per run of the same seed:
    ``004 §5.1 row 5, §4.1, §4.3``."""
    parts = []
    for i, passage in enumerate(passages):
        parts.append(passage.citation(same_seed=i > 0 and passages[i - 1].seed == passage.seed))
    return ", ".join(parts)


def troubleshooting_row(row: int, symptom: str) -> Passage:
    """A row of ``004`` §5.1's table (symptom, what to check, what to change)."""
    return Passage("004", "5.1", f"row {row}", symptom)
