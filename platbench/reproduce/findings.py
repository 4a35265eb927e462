"""A study's findings file (studies/STUDY.yml): read, checked against its schema, and turned into ``Finding``s.

The schema (studies/findings.schema.yml) checks the file's shape; what it cannot say (an id given twice, a `within`
relation whose bounds exclude its own reference) is checked here. Whether each finding's experiment, scenarios and
metric exist is planning's part (planning.py), which plans the experiments.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import yaml

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.module_utils.platforms import BASELINE

REPO = Path(__file__).resolve().parents[2]
STUDIES = REPO / "studies"
SCHEMA = STUDIES / "findings.schema.yml"
SEEDS = "../shared/seeds"  # where the papers' text files are, beside a development checkout
# A selector's keys that are not cell labels.
METRIC_KEY = "metric"


def baseline_first(platforms):
    """``platforms`` sorted, the baseline (bare metal) first."""
    return sorted(platforms, key=lambda name: (name != BASELINE, name))


class StudyError(ValueError):
    """A study or finding is unknown, or its file is invalid; the message names the file, the finding and the key."""


class Selector(NamedTuple):
    """The cells one side of a ratio takes: ``labels`` they must have (values compared as text) and the ``metric``
    read on them (None: the finding's)."""

    labels: dict
    metric: str | None
    text: str

    @classmethod
    def parse(cls, value):
        """A platform (``cn``), a scenario (``cn/2/pin/cpu``) or a mapping of labels, ``metric`` among them."""
        if isinstance(value, str):
            parts = value.split("/")
            if len(parts) == 1:
                return cls({"platform": value}, None, value)
            return cls({"scenario": value}, None, value)
        labels = {key: item for key, item in value.items() if key != METRIC_KEY}
        metric = value.get(METRIC_KEY)
        text = ", ".join(f"{key}={item}" for key, item in value.items())
        return cls(labels, metric, text)

    def platforms(self):
        """The platforms this side names, as a set (empty: it names none)."""
        if "platform" in self.labels:
            return {str(self.labels["platform"])}
        if "scenario" in self.labels:
            return {str(self.labels["scenario"]).split("/")[0]}
        return set()


class Relation(NamedTuple):
    """``kind`` (within, above, below) on the quantity ``of`` / ``to`` [/ (``per_of`` / ``per_to``)]."""

    kind: str
    of: Selector
    to: Selector
    per_of: Selector | None
    per_to: Selector | None
    tolerance: float | None
    ref: float
    bound: float | None

    @classmethod
    def parse(cls, data):
        per = data.get("per") or {}
        return cls(
            data["type"],
            Selector.parse(data["of"]),
            Selector.parse(data["to"]),
            Selector.parse(per["of"]) if per else None,
            Selector.parse(per["to"]) if per else None,
            data.get("tolerance"),
            float(data.get("ref", 1.0)),
            data.get("bound"),
        )

    def sides(self):
        """``[(selector, sign)]``: the quantity's log is the sum of sign x log(mean on the selector)."""
        sides = [(self.of, 1), (self.to, -1)]
        if self.per_of is not None:
            sides += [(self.per_of, -1), (self.per_to, 1)]
        return sides

    def bounds(self):
        """``(low, high)`` the quantity must lie within for the relation to hold (None: unbounded on that side)."""
        if self.kind == "within":
            return self.ref * (1.0 - self.tolerance), self.ref * (1.0 + self.tolerance)
        if self.kind == "above":
            return self.bound, None
        return None, self.bound

    def quantity_text(self):
        text = f"{self.of.text} / {self.to.text}"
        if self.per_of is not None:
            text = f"({text}) / ({self.per_of.text} / {self.per_to.text})"
        return text

    def text(self):
        """The relation in one line: ``cn / bm within 1.00 ± 5%``, ``vm / cn below 1.000``."""
        if self.kind == "within":
            return f"{self.quantity_text()} within {self.ref:.2f} ± {self.tolerance:.0%}"
        return f"{self.quantity_text()} {self.kind} {self.bound:.3f}"


class Finding(NamedTuple):
    """One finding of a study, as its file gives it (``data``), with its relation parsed."""

    study: str
    id: str
    data: dict
    relation: Relation

    @property
    def claim(self):
        return self.data["claim"]

    @property
    def experiment(self):
        return self.data["experiment"]

    @property
    def metric(self):
        return self.data["metric"]

    @property
    def needs(self):
        return self.data.get("needs") or {}

    def metrics(self):
        """Every metric the relation reads: the finding's and any a side names."""
        names = [self.metric] + [side.metric for side, _ in self.relation.sides() if side.metric]
        return list(dict.fromkeys(names))

    def platforms(self):
        """The platforms the finding runs: its own list, else bm and those its relation names."""
        if self.data.get("platforms"):
            return list(self.data["platforms"])
        named = set().union(*(side.platforms() for side, _ in self.relation.sides()))
        where = self.data.get("where") or {}
        if "platform" in where:
            named.add(str(where["platform"]))
        return baseline_first(named | {BASELINE})


class Study(NamedTuple):
    """A findings file: its ``name``, ``path``, the file's ``data`` and its ``findings`` in order."""

    name: str
    path: Path
    data: dict
    findings: list

    @property
    def title(self):
        return self.data["title"]

    @property
    def figure(self):
        return self.data["figure"]

    def finding(self, finding_id):
        for finding in self.findings:
            if finding.id == finding_id:
                return finding
        known = ", ".join(finding.id for finding in self.findings)
        raise StudyError(f"{self.path}: no finding {finding_id!r} in study {self.name}; its findings: {known}")


def available(directory=STUDIES):
    """The studies of ``directory``: every STUDY.yml but the schema, sorted."""
    return sorted(path.stem for path in Path(directory).glob("*.yml") if path != SCHEMA and ".schema" not in path.name)


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema

    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _where(error, data):
    """The path of a schema error in the file's terms: ``findings[3] (id x).relation.tolerance``."""
    parts, node = [], data
    for part in error.absolute_path:
        if isinstance(part, int):
            finding_id = node[part].get("id") if isinstance(node, list) and isinstance(node[part], dict) else None
            parts.append(f"[{part}]" + (f" (id {finding_id})" if finding_id and not parts[1:] else ""))
        else:
            parts.append(("." if parts else "") + str(part))
        node = node[part]
    return "".join(parts) or "the file"


def problems(data, name):
    """Every problem of a findings file's ``data`` (the study ``name`` its file stem), as lines; [] when valid."""
    found = [
        f"{_where(error, data)}: {error.message}"
        for error in sorted(_validator().iter_errors(data), key=lambda error: list(map(str, error.absolute_path)))
    ]
    if found:
        return found
    if data["study"] != name:
        found.append(f"study: {data['study']!r} is not the file's name {name!r}")
    seen = set()
    for index, finding in enumerate(data["findings"]):
        where = f"findings[{index}] (id {finding['id']})"
        if finding["id"] in seen:
            found.append(f"{where}: the id is given twice")
        seen.add(finding["id"])
        relation = finding["relation"]
        if relation["type"] == "within" and relation.get("tolerance", 0) >= 1:
            found.append(f"{where}.relation.tolerance: give a fraction below 1 (0.05: ±5%)")
        for label in finding.get("for_each") or []:
            if label in (finding.get("where") or {}):
                found.append(f"{where}.for_each: {label} is fixed by where; drop one of the two")
    return found


def load(study, directory=STUDIES):
    """The ``Study`` named ``study`` (a file of ``directory``), or StudyError naming what was wrong."""
    directory = Path(directory)
    path = directory / f"{study}.yml"
    known = available(directory)
    if study not in known:
        raise StudyError(f"no study {study!r}: the studies are {', '.join(known)} ({directory}/STUDY.yml)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise StudyError(f"{path}: cannot be read: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise StudyError(f"{path}: give a mapping with study, title, citation, sources, figure and findings")
    found = problems(data, study)
    if found:
        raise StudyError(f"{path} is not a valid findings file:\n" + "\n".join(f"  {line}" for line in found))
    findings = [Finding(study, item["id"], item, Relation.parse(item["relation"])) for item in data["findings"]]
    return Study(study, path, data, findings)


def selected(study, finding_ids):
    """The findings ``finding_ids`` names (all where it is empty), in the file's order; StudyError on an unknown id."""
    if not finding_ids:
        return list(study.findings)
    wanted = {study.finding(finding_id).id for finding_id in finding_ids}
    return [finding for finding in study.findings if finding.id in wanted]
