"""The ladder from bm to a platform: one mechanism added per rung, each rung a platform of the registry that really
runs the workload (docs/src/explaining.md). Each platform's registry entry declares its step: the rung below it
(``rung_below``), the mechanism it adds (``mechanism``, ``adds``) and what the step cannot tell apart.

Each step names the rung it climbs to, the rung below it (its baseline), the mechanism it adds and what it cannot
isolate. A rung this host cannot build is left out, and the step above it then adds both mechanisms (the plan says
which and why); the target platform and bm themselves must be ready. A platform with no step (a cloud instance, whose
machine the cloud builds) has no ladder.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import rungs as rung_texts


@dataclass(frozen=True)
class Step:
    """One rung of a ladder: ``platform`` measured against ``below``; ``mechanism`` is what it adds, in a few words
    (the attribution line's name), ``adds`` the same in a sentence, ``cannot`` what the step cannot tell apart. A rung
    of a path is a platform with label values (``settings``: cn with ``data_path: overlay``), over the same platform
    with others (``below_settings``)."""

    platform: str
    below: str
    mechanism: str
    adds: str
    cannot: str = ""
    settings: dict = field(default_factory=dict)
    below_settings: dict = field(default_factory=dict)

    @property
    def rung(self):
        """The rung's text, as the experiment's ``baselines`` names it (rungs.py): ``cn`` or ``cn[data_path:bind]``."""
        return rung_texts.text(self.platform, self.settings)

    @property
    def below_rung(self):
        return rung_texts.text(self.below, self.below_settings)


# The paths a workload may use, each one or more rungs on top of the platform's own: the label the campaign varies on
# the top platform only, its levels (the first the platform's own way; each further one a rung: its mechanism, what
# it adds, what it cannot tell apart), who can take it (the kind's capability, through these engines; None: any) and
# what in the experiment says the workload uses it.
PATHS = {
    "data_path": {
        "levels": (
            ("bind", "", "", ""),
            (
                "overlay",
                "overlay data",
                "the data directory read through a read-only overlayfs (as from an image layer), not a bind mount",
                "overlayfs's own lookups from the page cache it shares with the bind mount",
            ),
        ),
        "capability": "data_overlay",
        "engines": ("docker",),
    },
    "network": {
        "levels": (
            ("loopback", "", "", ""),
            (
                "bridge",
                "bridge and veth",
                "the ranks' traffic through veth pairs and a Linux bridge of the cell's own, not the loopback",
                "the veth pair from the bridge",
            ),
            (
                "overlay",
                "VXLAN overlay",
                "VXLAN over that bridge as flannel's VXLAN backend builds it (MTU 1450), not the bridge alone",
                "encapsulation from the smaller MTU",
            ),
        ),
        "capability": "instances",
        "engines": None,
    },
}


# Each platform's step, as its registry entry declares it (rung_below, mechanism, adds, cannot_isolate).
STEPS = {
    entry.label: Step(entry.label, entry.rung_below, entry.mechanism, entry.adds, entry.cannot_isolate or "")
    for entry in platforms.PLATFORMS
    if entry.rung_below and entry.placement
}


class LadderError(ValueError):
    """A platform that has no ladder or cannot be climbed here; the message says why and what to do."""


def chain(platform):
    """The steps from bm up to ``platform``, bottom first, as declared (STEPS)."""
    if platform not in platforms.BY_LABEL:
        raise LadderError(f"platform {platform!r}: unknown; known: {', '.join(platforms.LABELS)}")
    if platform == platforms.BASELINE:
        raise LadderError(f"platform {platform}: it is the baseline every rung is measured from; name another")
    if platform not in STEPS:
        entry = platforms.get(platform)
        why = "a cloud instance, whose machine the cloud builds" if entry.remote else "a platform no step reaches"
        raise LadderError(
            f"platform {platform}: no ladder ({why}: nothing between bm and it runs on this host); explain one of "
            f"{', '.join(label for label in STEPS)}"
        )
    steps, current = [], platform
    while current != platforms.BASELINE:
        step = STEPS[current]
        steps.append(step)
        current = step.below
    return list(reversed(steps))


def climb(platform, unready=None):
    """``(steps, left_out)``: the ladder to ``platform`` on a host where the platforms of ``unready`` (label ->
    why) cannot run. A rung left out merges into the step above it (``left_out``: (label, why) each); the target and
    bm must be ready, or LadderError says why."""
    unready = unready or {}
    for needed in (platforms.BASELINE, platform):
        if needed in unready and needed in platforms.BY_LABEL:
            raise LadderError(f"platform {needed} cannot run on this host: {unready[needed]}")
    steps, left_out, pending = [], [], []
    for step in chain(platform):
        if step.platform != platform and step.platform in unready:
            left_out.append((step.platform, unready[step.platform]))
            pending.append(step)
            continue
        if pending:
            merged = [*pending, step]
            step = replace(
                step,
                below=pending[0].below,
                mechanism=" + ".join(part.mechanism for part in merged),
                adds="; ".join(part.adds for part in merged),
                cannot=f"{', '.join(part.platform for part in pending)} left out: the mechanisms above apart",
            )
            pending = []
        steps.append(step)
    return steps, left_out


# A libvirt guest's set-up, each value adding one mechanism to the one before it (experiment_spec.GUEST_SETUPS; the
# guest kind's SETUPS): the rungs of a guest, between bm and the engines in it.
GUEST_SETUP = "guest_setup"
GUEST_SETUPS = (
    ("floating", "", "", ""),
    ("pinned", "vCPU pinning", "each vCPU pinned to one CPU of the cell (<vcpupin>), not floating over them", ""),
    ("hugepages", "huge pages", "the guest's memory backed by huge pages, not the host's 4 KiB pages", ""),
    (
        "virtio",
        "virtio devices",
        "virtio disks and NICs in place of emulated SATA and e1000",
        "the disks from the NICs: both change together",
    ),
)


def with_guest_setups(steps):
    """The ladder with a guest's set-ups as rungs: its first guest rung with floating vCPUs and emulated devices, then
    one rung a mechanism (pinning, huge pages, virtio), and the rungs above it on a guest of the last set-up; and
    whether any was added."""
    first = next((index for index, step in enumerate(steps) if platforms.get(step.platform).guest), None)
    if first is None:
        return steps, False
    guest = steps[first]
    levels = [level for level, *_ in GUEST_SETUPS]
    climbed = [
        replace(
            guest,
            settings={GUEST_SETUP: levels[0]},
            adds="a libvirt guest: its own kernel, its vCPUs floating over the cell's CPUs, emulated SATA disks and "
            "e1000 NICs (the rungs above add pinning, huge pages and virtio)",
        )
    ]
    for (below, *_), (level, mechanism, adds, cannot) in zip(GUEST_SETUPS, GUEST_SETUPS[1:], strict=False):
        climbed.append(
            Step(guest.platform, guest.platform, mechanism, adds, cannot, {GUEST_SETUP: level}, {GUEST_SETUP: below})
        )
    last = {GUEST_SETUP: levels[-1]}
    above = [
        replace(step, below_settings=last if step.below == guest.platform else step.below_settings)
        for step in steps[first + 1 :]
    ]
    return [*steps[:first], *climbed, *above], True


def path_steps(top, label):
    """The rungs of path ``label`` (PATHS) on top of ``top`` (the ladder's last step, whose rung then takes the path's
    first level): ``[top with its settings, a step per further level]``."""
    levels = PATHS[label]["levels"]
    found = [replace(top, settings={**top.settings, label: levels[0][0]})]
    for (below, *_), (level, mechanism, adds, cannot) in zip(levels, levels[1:], strict=False):
        found.append(
            Step(
                top.platform,
                top.platform,
                mechanism,
                adds,
                cannot,
                settings={**top.settings, label: level},
                below_settings={**top.settings, label: below},
            )
        )
    return found


def can_take_path(platform, label):
    """Whether ``platform``'s cells can take path ``label``'s further levels (its kind declares the path's capability,
    through one of its engines)."""
    entry, path = platforms.get(platform), PATHS[label]
    engines = path["engines"]
    return bool(getattr(placements.declaration(entry), path["capability"])) and (
        engines is None or entry.engine in engines
    )


def with_paths(steps, labels):
    """The ladder with the rungs of each path of ``labels`` (the paths the workload uses) its top platform can take,
    on top of it; and the paths added."""
    added = []
    for label in labels:
        if label in PATHS and can_take_path(steps[-1].platform, label):
            steps = [*steps[:-1], *path_steps(steps[-1], label)]
            added.append(label)
    return steps, added


def levels_of(label):
    """A path's levels, the platform's own first."""
    return [level for level, *_ in PATHS[label]["levels"]]


def rungs(steps):
    """The platforms of a ladder, bm first, each once."""
    return list(dict.fromkeys([platforms.BASELINE, *(step.platform for step in steps)]))


def baselines(steps, direct=True):
    """The experiment's ``baselines`` of a ladder: each rung (its text) against the rung below it, and the top against
    bm too (``direct``: the ratio the product of the steps is checked against) where bm is not already below it."""
    found = {}
    for index, step in enumerate(steps):
        last = index == len(steps) - 1
        found[step.rung] = (
            [step.below_rung, platforms.BASELINE]
            if direct and last and step.below_rung != platforms.BASELINE
            else step.below_rung
        )
    return found
