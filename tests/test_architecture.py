"""The code's shape, checked: no private names across modules, no import cycles, every task a
service queues by name is registered, the adapters' enums agree with the stored choices, and
only ``pools/tenancy/`` decides who may see and do what.

The layer and purity contracts are import-linter's (``lint-imports``, configured in
pyproject.toml); these are the rules it cannot express.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp
import pytest

from billing.services.cluster_usage import USAGE_IMPORT_CLUSTER
from pools import jobs
from pools.common import choices
from pools.tenancy import permissions as tenancy_permissions
from pools.tenancy import roles as tenancy_roles
from scheduler_adapters import kubernetes_elastic, types

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("portal", "billing", "pools", "scheduler_adapters")


def _product_files():
    for package in PACKAGES:
        yield from (ROOT / package).rglob("*.py")


def test_no_module_imports_another_modules_private_name():
    offences = []
    for path in _product_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if alias.name.startswith("_"):
                    offences.append(f"{path.relative_to(ROOT)}: {node.module}.{alias.name}")
    assert offences == []


def test_the_project_has_no_import_cycle():
    # Only the registry modules (pools.models, pools.tasks) import their sub-domains' modules
    # for Django and Celery; nothing imports them back, so they cannot close a cycle either.
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            # A package and its own __init__'s re-exports are one module to grimp: skip those.
            if len(component) > 1:
                cycles.append(sorted(component))

    import sys

    # Raised for this walk only: left at 10,000 it let later tests' deliberately deep YAML
    # (tests/scheduler_adapters/test_documents.py) parse without the RecursionError they test.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        for module in modules:
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    assert cycles == []


@pytest.mark.parametrize(
    "name",
    [
        jobs.OUTBOX_DRAIN,
        jobs.ALLOCATION_PROVISION,
        jobs.ALLOCATION_UNBIND,
        jobs.ALLOCATION_REBIND,
        jobs.SIZING_ESTIMATE,
        jobs.ELASTIC_APPLY,
        jobs.ELASTIC_HAND_BACK,
        jobs.RECONCILE,
        jobs.RECONCILE_CLUSTER,
        jobs.SERVING_ROLLUP,
        jobs.SERVING_COMPACT,
        jobs.CALIBRATION_REFRESH,
        jobs.ADVISOR_PASS,
        jobs.ADVISOR_DIGEST,
        jobs.CLUSTER_CHECK,
        jobs.PENDING_WORK_CLUSTER,
        jobs.IDLE_SCAN_CLUSTER,
        USAGE_IMPORT_CLUSTER,
    ],
)
def test_every_task_services_queue_by_name_is_registered(name):
    from celery import current_app

    assert name in current_app.tasks


def test_only_pools_jobs_hands_work_to_the_broker():
    """Every send goes through pools.jobs (the outbox), so a broker outage never fails a
    request after its commit nor loses the job: no ``.delay``, ``.apply_async``,
    ``.delay_on_commit`` or ``send_task`` anywhere else (a task's own ``self.retry`` runs in
    the worker, on a broker that just delivered it)."""
    senders = {"delay", "apply_async", "delay_on_commit", "send_task"}
    offences = []
    for path in _product_files():
        if path.is_relative_to(ROOT / "pools" / "jobs"):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in senders:
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert offences == []


@pytest.mark.parametrize(
    ("adapter_enum", "stored"),
    [
        (types.NodeState, choices.NodeState),
        (types.GpuHealth, choices.GpuHealth),
        (types.InventorySource, choices.InventorySource),
        (kubernetes_elastic.QuotaBackend, choices.QuotaBackend),
    ],
)
def test_adapter_enums_are_stored_choices(adapter_enum, stored):
    # Every value an adapter reports can be stored; the database may know more ("unknown").
    assert {m.value for m in adapter_enum} <= set(stored.values)
    assert {m.name for m in adapter_enum} <= set(stored.names)


def test_a_page_that_queues_work_never_asks_a_result_backend(monkeypatch):
    # With a broker and no result backend (the default deployment), enqueue must not call
    # .ready()/.get() on the AsyncResult: a DisabledBackend raises on both.
    from celery import current_app
    from celery.result import AsyncResult

    task = current_app.tasks[jobs.RECONCILE]
    monkeypatch.setattr(task, "delay", lambda *args: AsyncResult("queued-id", app=current_app))
    assert jobs.enqueue(jobs.RECONCILE) is None


# Who may see and do what is decided in pools/tenancy/ only (roles, permissions, visible_to):
# elsewhere, reading the staff flag, comparing a role, or filtering on a team's memberships
# is a second copy of a rule that leaks when copied wrong. Creating demo users and
# memberships (``"is_staff": True``, ``get_or_create``) is not a check and passes.
ROLE_AND_MEMBERSHIP_CHECKS = re.compile(
    r"""\.is_(staff|superuser)\b"""  # user.is_staff
    r"""|\bis_(staff|superuser)(__\w+)?\s*=(?!=)"""  # .filter(is_staff=True)
    r"""|["']is_(staff|superuser)["']\s*[,)]"""  # getattr(user, "is_staff", False)
    r"""|\bstaff_member_required\b|\bIsAdminUser\b"""
    r"""|\brole\w*\s*(==|!=)|(==|!=)\s*(["'](manager|member)["']|TeamRole\.)"""
    r"""|\brole(__\w+)?\s*=\s*TeamRole"""  # .filter(role=TeamRole.MANAGER)
    r"""|memberships__|members__|teams__|\.memberships\b|\b(user|actor)\.teams\b"""
    r"""|\bMembership\.objects\.(?!(get_or_create|create|bulk_create)\b)\w+"""
)


def _app_sources():
    """Every product file a rule could be copied into: the apps' Python (but the rules' home,
    pools/tenancy, and migrations), the templates and the browser's scripts."""
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).parts
            if parts[:2] != ("pools", "tenancy") and "migrations" not in parts:
                yield path
    yield from (ROOT / "templates").rglob("*.html")
    yield from (ROOT / "static").rglob("*.js")


def test_only_tenancy_reads_roles_and_memberships():
    offences = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _app_sources()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ROLE_AND_MEMBERSHIP_CHECKS.search(line)
    ]
    assert offences == []


def test_the_role_scan_reads_every_product_file():
    # An empty or partial scan would pass the test above vacuously: it reads every package,
    # the templates and the scripts, and the pages and APIs that check rules the most.
    scanned = {path.relative_to(ROOT).as_posix() for path in _app_sources()}
    homes = {name.split("/")[0] for name in scanned}
    python = {p.relative_to(ROOT).as_posix() for package in PACKAGES
              for p in (ROOT / package).rglob("*.py")}  # fmt: skip

    assert homes == {*PACKAGES, "templates", "static"}
    assert {
        "billing/budgets/views.py",
        "pools/capacity/api.py",
        "pools/elastic/services.py",
        "templates/base.html",
        "static/js/portal.js",
    } <= scanned
    assert {
        name
        for name in python - scanned
        if not name.startswith("pools/tenancy/") and "/migrations/" not in name
    } == set()


#: The names of the rules (:mod:`pools.tenancy.permissions`, :mod:`pools.tenancy.roles`).
RULE_NAMES = {
    name
    for module in (tenancy_permissions, tenancy_roles)
    for name, value in vars(module).items()
    if callable(value)
    and getattr(value, "__module__", "") == module.__name__
    and not name.startswith("_")
}


def test_the_rules_are_imported_from_tenancy_only():
    # A rule imported through another module (``from pools.capacity.services.requests import
    # require_pool_admin``) reads as if that module owned it, and is the copy that drifts.
    offences = [
        f"{path.relative_to(ROOT)}: from {node.module} import {alias.name}"
        for path in _product_files()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.ImportFrom) and node.module
        and not node.module.startswith("pools.tenancy")
        for alias in node.names
        if alias.name in RULE_NAMES
    ]  # fmt: skip
    assert {"require_pool_admin", "may_request", "is_pool_admin"} <= RULE_NAMES
    assert offences == []


@pytest.mark.parametrize(
    "line",
    [
        "if request.user.is_staff:",
        "User.objects.filter(is_superuser=True)",
        'if not getattr(actor, "is_staff", False):',
        "@staff_member_required",
        'return team_role(user=u, team=t) == "manager"',
        "if role != TeamRole.MANAGER:",
        "Membership.objects.filter(team=team, role=TeamRole.MANAGER)",
        "qs.filter(team__memberships__user=user)",
        "team.memberships.filter(user=user).exists()",
        "Team.objects.filter(members__username=name)",
        "{% if user.is_staff or role == 'manager' %}",
        "teams = request.user.teams.all()",
        "Membership.objects.values('team')",
    ],
)
def test_the_role_check_pattern_finds_each_way_of_writing_one(line):
    assert ROLE_AND_MEMBERSHIP_CHECKS.search(line)


@pytest.mark.parametrize(
    "line",
    [
        'defaults={"is_staff": True, "is_superuser": True}',
        "Membership.objects.get_or_create(team=team, user=alice)",
        "self.teams = {slug: pk for pk, slug in rows}",
        "{% if is_pool_admin %}",
        "slugs = {team_id: slug for slug, team_id in catalogue.teams.items()}",
    ],
)
def test_the_role_check_pattern_passes_what_is_not_a_check(line):
    assert not ROLE_AND_MEMBERSHIP_CHECKS.search(line)


# The holding-allocations filter and the window-overlap filter, written by hand: a keyword
# ``<path>status__in=HOLDING_STATUSES`` (or a literal list naming APPROVED and ACTIVE), or a pair
# ``<path>starts_at__lt=`` / ``<path>ends_at__gt=`` (any ``*start*`` / ``*end*`` columns) in one
# call, or ``<path>starts_at__lte=t`` with ``<path>ends_at__gt=t``. pools.capacity.models
# holding_q / overlap_q / at_q are the one way to write them.
RULE_HOMES = {("pools", "capacity", "models.py")}


def _bound(keyword: str) -> tuple[str, str, str]:
    """``"allocation__starts_at__lt"`` as ``("allocation", "starts_at", "lt")``."""
    *path, column, op = ["", "", *keyword.split("__")]
    return "__".join(p for p in path if p), column, op


def _hand_written_rules(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        for name, value in keywords.items():
            if not name.endswith("status__in"):
                continue
            text = ast.unparse(value)
            if "HOLDING_STATUSES" in text or ("APPROVED" in text and "ACTIVE" in text):
                found.append(f"{name}={text}")
        bounds = [_bound(name) for name in keywords]
        found.extend(
            f"{start}=…, {end}=… (at one instant)"
            for (path, column, op), start in zip(bounds, keywords, strict=True)
            if op == "lte" and column == "starts_at"
            for (other, column2, op2), end in zip(bounds, keywords, strict=True)
            if (other, column2, op2) == (path, "ends_at", "gt")
            and ast.dump(keywords[start]) == ast.dump(keywords[end])
        )
        found.extend(
            f"{start}=…, {end}=…"
            for (path, column, op), start in zip(bounds, keywords, strict=True)
            if op == "lt" and "start" in column
            for (other, column2, op2), end in zip(bounds, keywords, strict=True)
            if other == path and op2 == "gt" and "end" in column2
        )
    return found


def test_holding_and_overlap_filters_are_written_once():
    offences = [
        f"{path.relative_to(ROOT)}: {rule}"
        for path in _product_files()
        if path.relative_to(ROOT).parts not in RULE_HOMES and "migrations" not in path.parts
        for rule in _hand_written_rules(path.read_text())
    ]
    assert offences == []


@pytest.mark.parametrize(
    "source",
    [
        "Allocation.objects.filter(status__in=HOLDING_STATUSES)",
        "qs.filter(state='open', allocation__status__in=lifecycle.HOLDING_STATUSES)",
        "Q(status__in=[S.APPROVED, S.PROVISIONING, S.ACTIVE, S.EXPIRING])",
        "Allocation.objects.filter(starts_at__lt=end, ends_at__gt=start)",
        "P.objects.filter(allocation__ends_at__gt=a, allocation__starts_at__lt=b, pool=p)",
        "Use.objects.filter(period_start__lt=end, period_end__gt=start)",
        "P.objects.filter(allocation__starts_at__lte=now, allocation__ends_at__gt=now)",
    ],
)
def test_the_rule_pattern_finds_each_way_of_writing_one(source):
    assert _hand_written_rules(source)


@pytest.mark.parametrize(
    "source",
    [
        "Allocation.objects.filter(holding_q(), overlap_q(start, end))",
        "qs.filter(status__in=APPLIED_STATUSES, ends_at__gt=now)",
        "qs.filter(status__in=(S.APPROVED, S.PROVISIONING))",
        "qs.filter(bucket_start__gte=start, bucket_start__lt=end)",
        "qs.filter(starts_at__lte=now + LEAD, ends_at__gt=now)",
        "qs.filter(allocation__starts_at__lt=end, node__ends_at__gt=start)",
    ],
)
def test_the_rule_pattern_passes_what_is_not_one(source):
    assert not _hand_written_rules(source)


# Issue #29 item 4: orchestrators read as named steps. Lines count from the def to the end, less
# the docstring; complexity is McCabe's as ruff's C901 counts it: 1 + each if/elif,
# loop, except clause and match case (not and/or, conditional expressions nor comprehensions).
STEP_LINES, STEP_COMPLEXITY = 40, 10
_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.match_case)


def _function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        lines -= first.end_lineno - first.lineno + 1  # a docstring is not code
    return lines


def _complexity(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    count = 1
    stack = list(node.body)
    while stack:
        child = stack.pop()
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # counted on its own
        count += isinstance(child, _BRANCHES)
        stack.extend(ast.iter_child_nodes(child))
    return count


def _step_offences(source: str) -> list[str]:
    return [
        f"{node.name}: {_function_lines(node)} lines, complexity {_complexity(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (_function_lines(node) > STEP_LINES or _complexity(node) > STEP_COMPLEXITY)
    ]


def test_the_request_orchestrators_are_short_named_steps():
    """Every function of the module of the capacity request's transitions (create, validate,
    submit, approve, accept, reject, cancel and their steps: the orchestrators issue #29 item 4
    names) is at most 40 lines without its docstring and of complexity at most 10. Every other
    service function is held to the lines alone
    (:func:`test_service_functions_are_short`)."""
    services = [
        path
        for package in ("pools", "billing")
        for path in (ROOT / package).rglob("*.py")
        if "services" in path.relative_to(ROOT).as_posix()
        and "def capacity_request_approve(" in path.read_text()
    ]
    assert len(services) == 1
    assert _step_offences(services[0].read_text()) == []


@pytest.mark.parametrize(
    ("source", "offence"),
    [
        ("def f():\n" + "    x = 1\n" * 40, "f: 41 lines, complexity 1"),
        ('def f():\n    """Doc."""\n' + "    x = 1\n" * 39, None),
        (
            "def f(a, b, c):\n"
            + "".join(f"    if a == {n}:\n        b += 1\n" for n in range(10))
            + "    return [x for x in b if x and c or a] if a else b\n",
            "f: 22 lines, complexity 11",
        ),
    ],
)
def test_the_step_measure_counts_lines_and_branches(source, offence):
    assert _step_offences(source) == ([offence] if offence else [])


# Issue #29 item 4 for every service: no function of a services module or services/ package of
# the product is over STEP_LINES lines (as _function_lines counts them), with no exceptions (the
# last five long ones were split into named steps in session 8). Keys of the offences are
# "path::qualified name" (Class.method, outer.inner).


def _qualified_functions(source: str):
    """``(qualified name, node)`` of every function in ``source``, methods and nested ones
    under their class's or function's name."""

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                yield from walk(child, f"{name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(source), "")


def _service_function_lines() -> dict[str, int]:
    """``{"path::qualified name": lines}`` of the functions over STEP_LINES in the product's
    services modules and services/ packages."""
    found = {}
    for path in sorted(_product_files()):
        relative = path.relative_to(ROOT)
        if "services" not in relative.with_suffix("").parts:
            continue
        for name, node in _qualified_functions(path.read_text()):
            if _function_lines(node) > STEP_LINES:
                found[f"{relative.as_posix()}::{name}"] = _function_lines(node)
    return found


def test_service_functions_are_short():
    assert _service_function_lines() == {}, f"over {STEP_LINES} lines: split into named steps"


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("def f():\n    def g():\n        pass\n", ["f", "f.g"]),
        ("class C:\n    def m(self):\n        pass\n    class D:\n        def n(self):\n"
         "            pass\n", ["C.m", "C.D.n"]),
        ("if True:\n    def f():\n        pass\n", ["f"]),
    ],
)  # fmt: skip
def test_functions_are_named_by_their_class_and_enclosing_function(source, names):
    assert [name for name, _ in _qualified_functions(source)] == names


# The app's registries, the only modules the root of pools/ may hold (issue 29, item 2): the
# package, its AppConfig, and what Django and Celery look up by name (models, admin, tasks, urls).
POOLS_ROOT_REGISTRIES = {"__init__", "apps", "admin", "models", "tasks", "urls"}


def test_the_root_of_pools_holds_only_registries():
    root_modules = {path.stem for path in (ROOT / "pools").glob("*.py")}
    assert root_modules <= POOLS_ROOT_REGISTRIES
    assert len(root_modules) <= 8


def _product_classes():
    """Every class defined in the product's modules, imported (each module once)."""
    import importlib
    import inspect

    for path in _product_files():
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name:
                yield cls


def _defined_outside(base: type, module_name: str) -> list[str]:
    return sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _product_classes()
        if issubclass(cls, base) and cls.__module__.rsplit(".", 1)[-1] != module_name
    )


def test_every_filterset_is_defined_in_a_filtersets_module():
    import django_filters

    assert _defined_outside(django_filters.FilterSet, "filtersets") == []


def test_every_form_is_defined_in_a_forms_module():
    from django import forms

    assert _defined_outside(forms.BaseForm, "forms") == []
