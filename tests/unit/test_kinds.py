"""A kind is one declared unit (placements/<kind>/: KIND = Kind(...)): every table of the kinds is built from the
declarations, a bad declaration or a platform naming an undeclared kind is refused when the registry loads, no kind
fact is written anywhere else, the planning core has no import cycle, and a kind declared only here, in test code,
plans and runs a real cell with no shared file changed."""

from __future__ import annotations

import ast
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.filter.placements import placement_results
from ansible_collections.platbench.lab.plugins.module_utils import engines, lxc, platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import registry
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import Kind, KindError, Observed
from ansible_collections.platbench.lab.workloads.common.record import parse_result_lines
from plan_options import cell_plan, plan_options

from tests.kinds import toy

REPO = Path(__file__).resolve().parents[2]
PLACEMENTS = REPO / "plugins" / "plugin_utils" / "placements"
ONE_NODE = {"cpus_allowed": [0, 1], "numa_nodes": {"0": [0, 1]}, "gpu_count": 0, "gpus": [], "cpu_cgroup": {}}
RUNSC = ["--platform=ptrace", "--network=none"]
OPTIONS = plan_options(
    host="runner",
    engines={"docker": {"answers": True, "version": "26.1.5", "image_id": "sha256:" + "a" * 64, "runtimes": {}}},
)


def make_cell(platform, cpu_config="pin", scaleup=1, **params):
    scenario = f"{platform}/{scaleup}/{cpu_config}/cpu"
    params = {"framework": "tensorflow", "model": "tiny", "steps": 3, "warmup_steps": 1, **params}
    labels = {"platform": platform, "scaleup": scaleup, "cpu_config": cpu_config, "processor": "cpu"}
    return {
        "id": f"{scenario}|r0",
        "scenario": scenario,
        "params": params,
        "labels": {**params, **labels, "workload": "cnn_train", "repeat": 0, "host": "runner"},
    }


# -- the declarations and the tables built from them -----------------------------------------------------------------


def test_every_kind_module_declares_its_kind_and_the_tables_are_built_from_them():
    folders = {path.parent.name for path in PLACEMENTS.glob("*/__init__.py")}
    assert set(placements.KINDS) == {
        "process",
        "container",
        "guest",
        "k8s_job",
        "cloud_instance",
        "micro_vm",
        "lxc",
        "chroot",
        "oci_bundle",
    }
    for name, kind in placements.KINDS.items():  # each in a folder of its own, its task files there
        assert kind.name == name and name in folders, name
        assert Path(kind.task_file).is_file() and Path(kind.task_file).parent.parent.name == name, kind.task_file
    # The tables are the declarations' facts, gathered: no kind is in one without declaring it.
    assert tuple(n for n, k in placements.KINDS.items() if k.fenced) == placements.FENCED
    assert set(placements.FENCED) == {"chroot", "container", "lxc", "micro_vm", "oci_bundle", "process"}
    assert placements.EMULATOR == ("guest",) and placements.DUET == ("chroot", "container", "oci_bundle", "process")
    assert placements.TAKES_QUOTA == ("chroot", "container", "oci_bundle", "process")
    assert placements.INNER_KINDS == {
        "cloud_instance": ("process", "k8s_job"),
        "guest": ("process", "container"),
        "micro_vm": ("process",),
    }
    # One results table: each result name one variable, the kinds' and the instance placements'.
    assert placements.RESULTS["lxc"] == "platform_run_lxc" and placements.RESULTS["guest"] == "vm_guest"
    assert placements.RESULTS["k8s_instances"] == "platform_run_k8s_instances"
    assert placement_results("all") == list(dict.fromkeys(placements.RESULTS.values()))
    assert placement_results(["guest"]) == ["vm_guest", "platform_run_vcpus"]
    # What a cell forgets: only the variables that hold a result now (a forgotten one holds {}).
    held = {"platform_run_process": {"rc": 0}, "vm_guest": {}, "platform_run_container": {"failed": True}, "x": 1}
    assert placement_results("all", holding=held) == ["platform_run_process", "platform_run_container"]
    assert placement_results(["guest"], holding=held) == []
    with pytest.raises(Exception, match="unknown kind.*nope; declared: chroot, cloud_instance, container"):
        placement_results(["nope"])


def test_cell_yml_forgets_and_record_cell_reads_only_the_declared_table():
    cell_yml = (REPO / "roles" / "platform_run" / "tasks" / "cell.yml").read_text()
    assert "platbench.lab.placement_results" in cell_yml
    for variable in placements.RESULTS.values():
        assert variable not in cell_yml, f"{variable} is named in cell.yml: the table names it"


def test_cell_yml_includes_the_task_file_the_plan_names_from_the_declaration():
    (place,) = [
        task
        for task in yaml.safe_load((REPO / "roles" / "platform_run" / "tasks" / "cell.yml").read_text())[0]["block"]
        if "ansible.builtin.include_tasks" in task
    ]
    assert place["ansible.builtin.include_tasks"] == "{{ platform_run_cell_plan.task_file }}"
    facts = {**ONE_NODE, "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"}}
    for platform in ("bm", "cn", "lx"):
        plan = cell_plan(make_cell(platform), facts, OPTIONS)
        assert plan["task_file"] == placements.KINDS[plan["kind"]].task_file
        assert Path(plan["task_file"]).resolve() == PLACEMENTS / plan["kind"] / "tasks" / "place.yml"


def test_a_declaration_missing_a_part_is_refused_naming_the_kind_and_the_part():
    parts = {
        "name": "toy",
        "summary": "a toy",
        "plan": lambda ctx, plan: None,
        "observed": lambda plan, results: Observed(),
        "task_file": "/kinds/toy/tasks/place.yml",
        "results": {"toy": "platform_run_toy"},
        "teardown": ("toy",),
    }
    for part in Kind.REQUIRED[1:]:
        with pytest.raises(KindError, match=rf"kind toy: its declaration lacks '{part}'"):
            Kind(**{**parts, part: None})
    with pytest.raises(KindError, match="kind toy: 'plan' must be a function"):
        Kind(**{**parts, "plan": "toy.plan"})
    with pytest.raises(KindError, match="kind toy: 'instances' 'ranks' is not one of"):
        Kind(**parts, instances="ranks")
    with pytest.raises(KindError, match="kind toy: 'machine' 'vm' is not one of"):
        Kind(**parts, machine="vm")
    with pytest.raises(KindError, match=r"kind toy: 'task_file' is the path of tasks/place.yml in the kind's folder"):
        Kind(**{**parts, "task_file": "toy.yml"})
    with pytest.raises(KindError, match="a kind is declared as a Kind"):
        placements.register({"name": "toy"})


def test_a_platform_naming_an_undeclared_kind_or_an_inner_kind_its_kind_does_not_hold_is_refused():
    stray = platforms.BY_LABEL["cn"]._replace(label="xx", kind="unikernel")
    assert placements.registry_problems([stray]) == [
        "platform xx: kind 'unikernel' is declared by no folder of plugins/plugin_utils/placements/ (declared: "
        f"{', '.join(placements.KINDS)}): declare it in the __init__.py of its folder there as KIND = Kind(...)"
    ]
    with pytest.raises(KindError, match="platform xx: kind 'unikernel' is declared by no folder"):
        placements.check_registry([stray])
    wrong_inner = platforms.BY_LABEL["mvm"]._replace(inner="container")
    assert placements.registry_problems([wrong_inner]) == ["platform mvm: a micro_vm holds process, not 'container'"]
    assert placements.registry_problems() == []


def test_a_registry_entry_whose_machine_or_network_differs_from_its_kinds_declaration_is_refused():
    # module_utils decides by these two fields on the hosts (a guest's data disk, a loopback shared by instances),
    # so they must say what the declaration says.
    unshared = platforms.BY_LABEL["bm"]._replace(network="own")
    hostless = platforms.BY_LABEL["vm"]._replace(machine="host")
    assert placements.registry_problems([unshared, hostless]) == [
        "platform bm: its network is 'own', but its kind process declares 'host': write network='host' in its "
        "registry entry",
        "platform vm: its machine is 'host', but its kind guest declares 'libvirt': write machine='libvirt' in its "
        "registry entry",
    ]
    assert (hostless.guest, hostless.data_view) == (False, "host")
    for kind in placements.KINDS.values():
        assert (kind.machine, kind.network) in {
            (platform.machine, platform.network) for platform in platforms.PLATFORMS if platform.kind == kind.name
        } or not platforms.labels_where(kind=kind.name)


# -- the guard: a kind's facts are written in its declaration only ---------------------------------------------------

# Where kind names may be listed: the declarations themselves, and the registry's entries (each names its kind).
DECLARING = {PLACEMENTS / name / "__init__.py" for name in placements.KINDS} | {PLACEMENTS / "common.py"}


def _kind_lists(path):
    """Literal tuples, lists, sets and dict keys of ``path`` holding two or more kind names: a kind's fact written
    as a list of kinds outside their declarations."""
    kinds = set(placements.KINDS)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [key for key in node.keys if key is not None]
        else:
            continue
        names = [item.value for item in items if isinstance(item, ast.Constant) and item.value in kinds]
        if len(names) >= 2:
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {names}")
    return found


def test_no_kind_fact_is_written_outside_its_declaration():
    sources = [path for folder in ("plugins", "platbench") for path in sorted((REPO / folder).rglob("*.py"))]
    found = [line for path in sources if path not in DECLARING for line in _kind_lists(path)]
    assert found == [], "declare these in placements/<kind>/ (Kind(...)) and read placements' tables instead"


# Jinja that picks by a kind's name: `selectattr('kind', ...)`, `kind == 'x'`, `'x' in kinds`, `equalto 'x'`.
JINJA_KIND = re.compile(
    r"selectattr\(\s*['\"](?:kind|placement|inner)['\"]|\b(?:kind|placement|inner)\s*(?:==|!=)\s*['\"]"
    r"|['\"](?:{names})['\"]\s*(?:==|!=|in)\b|(?:equalto|==|!=)[\s,(]*['\"](?:{names})['\"]"
)


def _constants(node, kinds):
    if isinstance(node, ast.Constant):
        return [node.value] if node.value in kinds else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [item.value for item in node.elts if isinstance(item, ast.Constant) and item.value in kinds]
    return []


def _kind_comparisons(path):
    """Comparisons of ``path`` with a kind's name: ``x == "process"``, ``x != "guest"``, ``x in ("container",)``
    (not ``"container" in result``, which asks whether a mapping holds a result of that name)."""
    kinds = set(placements.KINDS)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for index, op in enumerate(node.ops):
            left, right = operands[index], operands[index + 1]
            if isinstance(op, (ast.Eq, ast.NotEq)):
                names = _constants(left, kinds) + _constants(right, kinds)
            elif isinstance(op, (ast.In, ast.NotIn)):
                names = _constants(right, kinds) if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else []
            else:
                names = []
            if names:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_kind_name_is_compared_outside_its_declaration():
    """A kind's behaviour is asked of its declaration (``started_by``, ``through_api``, ``supervised``, ...), never
    by comparing its name; only a holder kind's own module names the kinds it holds."""
    sources = [path for folder in ("plugins", "platbench") for path in sorted((REPO / folder).rglob("*.py"))]
    found = {}
    for path in sources:
        if path in DECLARING:
            continue
        for line in _kind_comparisons(path):
            found.setdefault(str(path.relative_to(REPO)), []).append(line)
    # module_utils (shipped to the hosts, where the declarations are not) asks the registry entry's machine and
    # network, which the loader holds equal to the kind's declaration.
    assert found == {}, "ask the kind's declaration (placements.declaration(platform)) for a capability instead"
    pattern = re.compile(JINJA_KIND.pattern.format(names="|".join(placements.KINDS)))
    yaml_files = sorted({*REPO.glob("roles/**/*.yml"), *REPO.glob("playbooks/**/*.yml"), REPO / "site.yml"})
    in_jinja = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in yaml_files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert in_jinja == [], "let Python (a filter reading the declarations) choose by kind, not Jinja"


def test_the_guard_finds_a_single_kind_comparison(tmp_path):
    stray = tmp_path / "tool_checks.py"
    stray.write_text(
        'if platform.kind == "process":\n    pass\n'
        'ok = "container" in result\n'
        'if inner in ("guest",):\n    pass\n'
        'if engine == "docker":\n    pass\n'
    )
    assert [line.split(": ", 1)[1] for line in _at_root(_kind_comparisons, stray, tmp_path)] == [
        "platform.kind == 'process'",
        "inner in ('guest',)",
    ]
    pattern = re.compile(JINJA_KIND.pattern.format(names="|".join(placements.KINDS)))
    assert pattern.search("loop: \"{{ sides | selectattr('kind', 'equalto', 'docker') }}\"")
    assert pattern.search("when: platform_run_cell_plan.placement == 'guest'")
    assert pattern.search("when: \"'lxc' in planned_kinds\"")
    assert not pattern.search("loop: \"{{ sides | selectattr('engine', 'equalto', 'docker') }}\"")


def _at_root(finder, path, root):
    global REPO
    saved, REPO = REPO, root
    try:
        return finder(path)
    finally:
        REPO = saved


def test_the_guard_finds_a_kind_list_written_elsewhere(tmp_path):
    stray = tmp_path / "idle_cores.py"
    stray.write_text('FENCED_KINDS = ("process", "container")\nSINGLE = ("process",)\n')
    assert [line.split(": ", 1)[1] for line in _at_root(_kind_lists, stray, tmp_path)] == ["['process', 'container']"]


# -- the planning core has no import cycle ---------------------------------------------------------------------------

PREFIX = "ansible_collections.platbench.lab."


def reexports_only(path):
    """Whether a package's ``__init__`` only re-exports: a docstring, imports, ``__all__`` or a tuple of names, and
    a lazy ``__getattr__``/``__dir__`` (PEP 562); anything else runs code when a submodule of it is imported."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
            continue
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List, ast.Constant, ast.JoinedStr)):
            continue
        return False
    return True


def import_graph(root):
    """Module -> the project's modules it imports, anywhere in it (an import inside a function hides no cycle). A
    module importing anything of its own package imports that package's ``__init__`` first: an edge too, unless the
    ``__init__`` only re-exports."""
    files = [path for folder in ("plugins", "platbench") for path in (root / folder).rglob("*.py")]
    names = {}
    for path in files:
        parts = list(path.relative_to(root).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    running = {name for name, path in names.items() if path.name == "__init__.py" and not reexports_only(path)}
    graph = {}
    for name, path in names.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                base = node.module.removeprefix(PREFIX)
                subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in names]
                wanted = subs if len(subs) == len(node.names) else [*subs, base]
            elif isinstance(node, ast.Import):
                wanted = [alias.name.removeprefix(PREFIX) for alias in node.names]
            else:
                continue
            for target in wanted:
                parts = target.split(".")
                while parts and ".".join(parts) not in names:
                    parts.pop()
                if parts and ".".join(parts) != name:
                    targets.add(".".join(parts))
        package = name.rpartition(".")[0] if names[name].name != "__init__.py" else None
        if package in running and any(target.startswith(f"{package}.") or target == package for target in targets):
            targets.add(package)
        graph[name] = targets
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_plugins_and_platbench_import_no_cycle():
    graph = import_graph(REPO)
    assert len(graph) > 100 and "plugins.plugin_utils.cells.cellplan" in graph
    # The command line imports each command's module only when it is given, by import statements a reader can follow.
    assert {"platbench.run", "platbench.report.command", "platbench.store"} <= graph["platbench.cli"]
    assert cycles(graph) == []


def test_the_cycle_check_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_a_submodules_import_of_its_package_that_runs_code_is_an_edge(tmp_path):
    package = tmp_path / "plugins" / "pkg"
    package.mkdir(parents=True)
    (tmp_path / "platbench").mkdir()
    (package / "a.py").write_text(f"from {PREFIX}plugins.pkg import b\n")
    (package / "b.py").write_text("VALUE = 1\n")
    # An __init__ that imports a and builds something: importing b from a runs it, which imports a.
    (package / "__init__.py").write_text(f"from {PREFIX}plugins.pkg import a\nTABLE = {{a.b.VALUE: 1}}\n")
    assert cycles(import_graph(tmp_path)) == [["plugins.pkg", "plugins.pkg.a"]]
    # One that only re-exports, lazily, is no edge.
    (package / "__init__.py").write_text(
        '"""Re-exports."""\nEXPORTS = ("b",)\n\n\ndef __getattr__(name):\n    return name\n'
    )
    assert cycles(import_graph(tmp_path)) == []


def test_the_placements_package_reexports_the_registry_and_nothing_else():
    assert reexports_only(PLACEMENTS / "__init__.py")
    assert set(placements.EXPORTS) == set(registry.__all__)
    assert placements.KINDS is registry.KINDS
    with pytest.raises(AttributeError):
        placements.TABLES_BY_HAND  # noqa: B018 (an attribute the registry does not export)


# -- gv and lx plan what their declarations say ----------------------------------------------------------------------


def test_gv_runs_its_container_in_runsc_and_records_the_gvisor_platform():
    options = {**OPTIONS, "engines": {"docker": {**OPTIONS["engines"]["docker"], "runtimes": {"runsc": RUNSC}}}}
    plan = cell_plan(make_cell("gv"), ONE_NODE, options)
    assert plan["kind"] == "container" and plan["container"]["runtime"] == "runsc"
    assert plan["container"]["cpuset_cpus"] == "1" and plan["container"]["network_mode"] == "none"
    assert plan["runtime"]["oci_runtime"] == "runsc" and plan["runtime"]["gvisor_platform"] == "ptrace"
    assert engines.runtime_option(RUNSC, "platform") == "ptrace"
    # An engine without the runtime: refused, naming the role that registers it.
    with pytest.raises(Exception, match=r"the runsc runtime, which the docker engine of runner has not registered"):
        cell_plan(make_cell("gv"), ONE_NODE, OPTIONS)


def test_lx_runs_lxc_execute_with_its_cgroup_keys():
    plan = cell_plan(make_cell("lx"), ONE_NODE, OPTIONS)
    assert plan["kind"] == plan["placement"] == "lxc"
    settings = plan["lxc"]["settings"]
    assert "lxc.cgroup2.cpuset.cpus=1" in settings
    assert f"lxc.cgroup2.memory.max={int(OPTIONS['vm_memory_mb']) * 1024 * 1024}" in settings
    assert plan["lxc"]["argv"][:6] == ["lxc-execute", "--name", plan["name"], "--lxcpath", lxc.DIR, "--rcfile"]
    # lxc-execute's container inherits the line's policy: back to nice 0 and the normal policy (the harness runs at
    # SCHED_IDLE); the environment is the container's own (no `env -i`: its variables are set inside).
    assert plan["lxc"]["command"] == (
        "cd / && renice -n 0 -p $$ >/dev/null && exec chrt --other 0 timeout --verbose --kill-after=10 3600 env "
        + shlex.join(plan["lxc"]["argv"])
    )
    vanilla = cell_plan(make_cell("lx", cpu_config="vnl"), {**ONE_NODE, "cpu_cgroup": {"version": "v1"}}, OPTIONS)
    assert {"lxc.cgroup.cpu.cfs_quota_us=100000", "lxc.cgroup.cpu.cfs_period_us=100000"} <= set(
        vanilla["lxc"]["settings"]
    )
    assert vanilla["runtime"]["cpu_quota_requested"] == 1.0
    assert lxc.host_problem({"installed": False}, None).endswith("(role platbench.lab.lxc)")


# -- a kind declared only in a test folder plans, runs a real cell and tears down through its own task files ----------


@pytest.fixture
def toy_platform(monkeypatch):
    """The kind `toy` (tests/kinds/toy/, a folder as the collection's kinds are) and its platform `ty`, declared in
    the tests only: registered into the tables and the registry for the test."""
    placements.register(toy.KIND)
    entry = platforms.BY_LABEL["bm"]._replace(label="ty", kind="toy", launcher=None, baseline=False, requires=())
    monkeypatch.setattr(platforms, "PLATFORMS", (*platforms.PLATFORMS, entry))
    monkeypatch.setattr(platforms, "BY_LABEL", {**platforms.BY_LABEL, "ty": entry})
    monkeypatch.setattr(platforms, "LABELS", (*platforms.LABELS, "ty"))
    yield entry
    placements.unregister("toy")


def test_a_kind_declared_in_a_test_folder_plans_runs_a_real_cell_and_tears_down_through_its_task_files(
    toy_platform, playbook, tmp_path
):
    assert placements.KINDS["toy"] is toy.KIND and Path(toy.KIND.folder) == Path(toy.__file__).parent
    assert "toy" in placements.FENCED and placements.RESULTS["toy"] == "toy_result"
    assert placements.registry_problems([toy_platform]) == []
    plan = cell_plan(make_cell("ty"), ONE_NODE, OPTIONS)
    assert plan["placement"] == plan["kind"] == "toy" and plan["cpus"] == [1]
    assert plan["task_file"] == toy.KIND.task_file  # what cell.yml includes: the declared task file of its folder
    # The cell through the kind's own place.yml, in a real ansible-playbook run, included as cell.yml includes it.
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    place = [
        {
            "name": "Place a toy cell",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": local,
            "tasks": [{"ansible.builtin.include_tasks": "{{ platform_run_cell_plan.task_file }}"}],
        }
    ]
    run = playbook(place, {"platform_run_cell_plan": plan})
    assert run.rc == 0, run.output[-4000:]
    (result,) = run.results("Run the workload")
    observed = placements.observed(plan, {"toy": result})
    assert observed.runtime == {"rc": 0}, result.get("stderr", "")[-2000:]
    (record,) = parse_result_lines(observed.output)
    assert record["status"] == "ok" and record["workload"] == "cnn_train"
    assert {entry["metric"] for entry in record["metrics"]} >= {"throughput"}
    assert record["metadata"]["cpuset"] == "1"  # the workload ran on the CPU its plan chose
    assert not Path(plan["toy"]["scratch"]).exists()  # place.yml removed what it made
    # A stopped run's leftover, removed by the kind's own teardown.yml (its declaration names it).
    left = tmp_path / "scratch" / plan["name"]
    left.mkdir(parents=True)
    (own,) = [entry for entry in toy.KIND.teardown if os.path.isabs(entry)]
    tear = [{**place[0], "name": "Tear toy cells down", "tasks": [{"ansible.builtin.include_tasks": own}]}]
    run = playbook(tear, {"toy_scratch_root": str(left.parent)})
    assert run.rc == 0, run.output[-4000:]
    assert not left.exists()
    placements.unregister("toy")
    assert "toy" not in placements.KINDS and "toy" not in placements.RESULTS
