"""The adaptive idle policy's fleet priors: what resources like one another have learned, pooled. Pure.

A resource with little history of its own borrows from its peers (``advise``'s ``prior``): each idle period any
resource records (``IdleHistory.take_recorded``) is added to the pools of its groups, most specific first
(``peer_groups``): the same kind (EC2 instance or SageMaker notebook), team or workload tag and instance family;
the same tag; the same family; the same kind. A pool keeps the hour of the owner's day (not of the week), the
shape, the length bin and how the period ended, capped like a history (``MAX_ENTRIES`` cells, counts halved past
``MAX_COUNT``: recent behaviour weighs most), a few KB of text. A resource is judged by the most specific of its
groups that holds at least ``BELIEVED_FROM`` periods; with no such group, by its own history alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from costguard.detect.adaptive import Cell, PriorCell

# Tags that say which team or workload a resource serves, the first present is used.
PEER_TAGS: tuple[str, ...] = ("team", "Team", "workload", "Workload", "project", "Project")
MAX_ENTRIES = 200
MAX_COUNT = 2000
BELIEVED_FROM = 6
KINDS = ("ec2", "notebook")


def family_of(instance_type: str) -> str:
    """``g5`` of ``g5.xlarge`` and of ``ml.g5.xlarge``."""
    return instance_type.removeprefix("ml.").split(".")[0]


def peer_groups(kind: str, instance_type: str, tags: Mapping[str, str]) -> list[str]:
    """The groups a resource belongs to, most specific first (at most four)."""
    family = family_of(instance_type)
    tag = next((f"{k.lower()}={tags[k]}" for k in PEER_TAGS if tags.get(k)), None)
    groups = [f"{kind}/{tag}/{family}", f"{kind}/{tag}"] if tag else []
    return [*groups, f"{kind}/{family}", kind]


@dataclass
class Pool:
    """One group's pooled idle periods. ``to_text``/``from_text`` round-trip it."""

    counts: dict[PriorCell, float] = field(default_factory=dict)

    @property
    def samples(self) -> float:
        return sum(self.counts.values())

    def add(self, cells: Iterable[Cell]) -> bool:
        """Add recorded cells (hour of week is kept as the hour of the day). Returns whether any was added."""
        added = False
        for hour, shape, length, ended in cells:
            key = (hour % 24, shape, length, ended)
            self.counts[key] = self.counts.get(key, 0) + 1
            added = True
        if self.samples > MAX_COUNT:
            self.counts = {c: n / 2 for c, n in self.counts.items() if n >= 1}
        if len(self.counts) > MAX_ENTRIES:
            keep = sorted(self.counts.items(), key=lambda kv: kv[1], reverse=True)[:MAX_ENTRIES]
            self.counts = dict(keep)
        return added

    def to_text(self) -> str:
        cells = ",".join(f"{h}.{s}.{b}.{e}:{n:g}" for (h, s, b, e), n in sorted(self.counts.items()))
        return f"p1|{cells}"

    @classmethod
    def from_text(cls, text: str) -> Pool:
        """The pool ``to_text`` wrote; anything unreadable starts afresh."""
        version, _, cells = text.partition("|")
        if version != "p1":
            return cls()
        counts: dict[PriorCell, float] = {}
        try:
            for cell in filter(None, cells.split(",")):
                key, _, n = cell.partition(":")
                h, s, b, e = (int(x) for x in key.split("."))
                counts[(h, s, b, e)] = float(n)
        except ValueError:
            return cls()
        return cls(counts)


def prior_for(groups: list[str], pools: Mapping[str, Pool]) -> Mapping[PriorCell, float] | None:
    """The prior of a resource in these groups: the most specific pool holding enough periods, else None."""
    for group in groups:
        pool = pools.get(group)
        if pool is not None and pool.samples >= BELIEVED_FROM:
            return pool.counts
    return None


def pooled(
    recorded: Mapping[str, list[Cell]], groups: Mapping[str, list[str]], pools: dict[str, Pool]
) -> set[str]:
    """Add each resource's recorded cells to its groups' pools (created as needed). Returns the groups changed."""
    changed: set[str] = set()
    for resource, cells in recorded.items():
        if not cells:
            continue
        for group in groups.get(resource, []):
            if pools.setdefault(group, Pool()).add(cells):
                changed.add(group)
    return changed


def kind_of(resource: object) -> tuple[str, str] | None:
    """The adaptive policy's kind of a resource and its instance type, or None when the policy does not judge it."""
    from costguard.model import Ec2Instance, NotebookInstance

    if isinstance(resource, Ec2Instance):
        return "ec2", resource.type
    if isinstance(resource, NotebookInstance):
        return "notebook", resource.instance_type
    return None
