"""Server-rendered inventory pages. One URL per page answers with the full page, with only the
table fragment for htmx requests (``HX-Request``), or with CSV when ``export=csv`` is asked."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods

from pools.common.errors import DomainError
from pools.inventory import selectors
from pools.inventory.filtersets import GpuFilterSet, GpuModelFilterSet, NodeFilterSet
from pools.inventory.forms import AliasMapForm, CudaCheckForm, GpuModelForm, InventoryUploadForm
from pools.inventory.models import Node
from pools.inventory.services.catalogue import gpu_model_create, gpu_model_update
from pools.inventory.services.gpu_models import gpu_model_alias_map
from pools.inventory.services.import_files import inventory_import_file
from pools.inventory.services.importer import ImportReport
from pools.inventory.services.uploads import inventory_import_in_background, inventory_upload_queue
from pools.tenancy.permissions import may_administer_pools
from pools.web.pages import (
    Column,
    checked_export,
    csv_response,
    filtered_list,
    form_add_domain_errors,
    mig_slices_text,
    pool_admin_required,
)

NODE_COLUMNS = [
    Column("hostname", lambda n: n.hostname),
    Column("cluster", lambda n: n.cluster.slug if n.cluster else ""),
    Column("pool", lambda n: n.pool.slug if n.pool else None),
    Column("scheduler", lambda n: n.scheduler),
    Column("state", lambda n: n.state),
    Column("state_reason", lambda n: n.state_reason),
    Column("driver_version", lambda n: n.driver_version),
    Column("driver_branch", lambda n: n.driver_group.branch if n.driver_group else None),
    Column("cuda_version", lambda n: n.cuda_version),
    Column("gpus", lambda n: n.gpu_count),
    Column("gpus_allocated", lambda n: n.gpus_allocated),
    Column("unrecognised_gpus", lambda n: n.unrecognised_count),
    Column("last_source", lambda n: n.last_source),
    Column("last_seen_at", lambda n: n.last_seen_at.isoformat() if n.last_seen_at else None),
]


GPU_COLUMNS = [
    Column("node", lambda g: g.node.hostname),
    Column("index", lambda g: g.index),
    Column("gpu_model", lambda g: g.gpu_model.slug if g.gpu_model else None),
    Column("raw_model_name", lambda g: g.raw_model_name),
    Column("uuid", lambda g: g.uuid),
    Column("serial", lambda g: g.serial),
    Column("pci_bus_id", lambda g: g.pci_bus_id),
    Column("memory_total_mib", lambda g: g.memory_total_mib),
    Column("mig_mode", lambda g: g.mig_mode),
    Column("mig_devices", lambda g: g.mig_device_count),
    Column("health", lambda g: g.health),
    Column("pool", lambda g: g.node.pool.slug if g.node.pool else None),
    Column("driver_version", lambda g: g.node.driver_version),
]


GPU_MODEL_COLUMNS = [
    Column("slug", lambda m: m.slug),
    Column("name", lambda m: m.name),
    Column("class", lambda m: m.card_class),
    Column("form_factor", lambda m: m.form_factor),
    Column("memory_gib", lambda m: m.memory_gib),
    Column("memory_bandwidth_gbps", lambda m: m.memory_bandwidth_gbps),
    Column("bf16_dense_tflops", lambda m: m.bf16_dense_tflops),
    Column("fp8_dense_tflops", lambda m: m.fp8_dense_tflops),
    Column("int8_dense_tops", lambda m: m.int8_dense_tops),
    Column("nvlink_gbps", lambda m: m.nvlink_gbps),
    Column("tdp_w", lambda m: m.tdp_w),
    Column("cards_in_fleet", lambda m: m.gpu_count),
]


def node_list(request):
    return filtered_list(
        request,
        queryset=selectors.node_list(),
        filterset_class=NodeFilterSet,
        template="pools/node_list.html",
        columns=NODE_COLUMNS,
        filename="nodes.csv",
        default_ordering=("hostname",),
    )


def gpu_list(request):
    return filtered_list(
        request,
        queryset=selectors.gpu_list(),
        filterset_class=GpuFilterSet,
        template="pools/gpu_list.html",
        columns=GPU_COLUMNS,
        filename="gpus.csv",
        default_ordering=("node__hostname", "index"),
    )


def gpu_model_list(request):
    return filtered_list(
        request,
        queryset=selectors.gpu_model_list(),
        filterset_class=GpuModelFilterSet,
        template="pools/gpu_model_list.html",
        columns=GPU_MODEL_COLUMNS,
        filename="gpu-models.csv",
        default_ordering=("name",),
    )


@pool_admin_required
@require_http_methods(["GET", "POST"])
def gpu_model_edit(request, slug: str | None = None):
    """Create (no ``slug``) or edit a catalogue model; pool admins only, audited by the service."""
    model = None
    if slug is not None:
        model = selectors.gpu_model_list().filter(slug=slug).first()
        if model is None:
            raise Http404("No such GPU model.")
    form = GpuModelForm(request.POST or None, instance=model)
    if request.method == "POST" and form.is_valid():
        fields, aliases = form.service_values()
        try:
            if model is None:
                saved = gpu_model_create(
                    slug=form.cleaned_data["slug"],
                    fields=fields,
                    aliases=aliases,
                    actor=request.user,
                )
            else:
                saved = gpu_model_update(
                    gpu_model=model, changes=fields, aliases=aliases, actor=request.user
                )
        except DomainError as exc:
            for field, message in (exc.data.get("errors") or {None: exc.message}).items():
                form.add_error(_FORM_FIELD.get(field, None), message)
        else:
            messages.success(request, f"GPU model {saved.name} saved.")
            return redirect(f"{reverse('pools:gpu-model-list')}?q={saved.slug}")
    return render(request, "pools/gpu_model_form.html", {"form": form, "model": model})


# The service's field names -> the form's.
_FORM_FIELD = {
    "slug": "slug",
    "vendor_name": "vendor_name",
    "aliases": "aliases_text",
    "pci_device_ids": "pci_device_ids_text",
    "sources": "sources_text",
}


def node_detail(request, hostname: str):
    """``/nodes/<hostname>/[?cluster=<slug>]``: host names are unique per cluster, so the page
    names the cluster and links the other clusters' nodes of that name."""
    try:
        node, others = selectors.node_detail(
            hostname=hostname, cluster=request.GET.get("cluster") or None
        )
    except Node.DoesNotExist:
        raise Http404(f"No node named {hostname!r}.") from None
    export = checked_export(request)
    gpus = list(node.gpus.all())
    if export == "csv":
        for gpu in gpus:
            gpu.mig_device_count = len(gpu.mig_devices.all())
        return csv_response(gpus, GPU_COLUMNS, f"{node.hostname}-gpus.csv")
    return render(request, "pools/node_detail.html", {"node": node, "gpus": gpus, "others": others})


FLEET_COLUMNS = [
    Column("pool", lambda r: r.pool),
    Column("gpu_model", lambda r: r.gpu_model),
    Column("driver_group", lambda r: r.driver_group),
    Column("node_state", lambda r: r.state),
    Column("cards", lambda r: r.cards),
    Column("healthy_cards", lambda r: r.healthy),
    Column("mig_cards", lambda r: r.mig_cards),
    Column("mig_slices", lambda r: mig_slices_text(r.mig_slices)),
]


def fleet_overview(request):
    export = checked_export(request)
    rows = selectors.fleet_summary()
    if export == "csv":
        return csv_response(rows, FLEET_COLUMNS, "fleet.csv")
    pools = sorted({r.pool for r in rows})
    models = sorted({r.gpu_model for r in rows})
    per_model_pool = {(r.gpu_model, r.pool): 0 for r in rows}
    for r in rows:
        per_model_pool[(r.gpu_model, r.pool)] += r.cards
    chart = {
        "labels": models,
        "datasets": [
            {"label": p, "data": [per_model_pool.get((m, p), 0) for m in models]} for p in pools
        ],
    }
    context = {
        "rows": rows,
        "totals": selectors.fleet_totals(),
        "chart": chart,
        "unrecognised": selectors.unrecognised_model_list()[:5],
        "imports": selectors.inventory_import_list()[:5],
    }
    return render(request, "pools/fleet_overview.html", context)


POOL_COLUMNS = [
    Column("pool", lambda p: p.slug),
    Column("name", lambda p: p.name),
    Column("cluster", lambda p: p.cluster.slug if p.cluster else None),
    Column("scheduler", lambda p: p.scheduler),
    Column("slurm_partition", lambda p: p.slurm_partition),
    Column(
        "k8s_node_selector",
        lambda p: ",".join(f"{k}={v}" for k, v in p.k8s_node_selector.items()),
    ),
    Column("overcommit_ratio", lambda p: p.overcommit_ratio),
    Column("nodes", lambda p: p.node_count),
    Column("gpus", lambda p: p.gpu_count),
    Column("gpus_in_mig_mode", lambda p: p.mig_gpu_count),
    Column("driver_branches", lambda p: p.driver_branch_count),
]
DRIVER_GROUP_COLUMNS = [
    Column("branch", lambda g: g.branch),
    Column("min_driver_version", lambda g: g.min_driver_version),
    Column("max_driver_version", lambda g: g.max_driver_version),
    Column("max_cuda", lambda g: g.max_cuda),
    Column("nodes", lambda g: g.node_count),
    Column("gpus", lambda g: g.gpu_count),
    Column("gpus_in_mig_mode", lambda g: g.mig_gpu_count),
]


def pool_list(request):
    """Pools and driver groups with their cards; ``?export=csv`` the pools table
    (:data:`POOL_COLUMNS`), ``?export=driver-groups`` the driver groups'
    (:data:`DRIVER_GROUP_COLUMNS`), in the page's order (by name, by branch)."""
    export = checked_export(request, ("csv", "driver-groups"))
    if export == "csv":
        pools = selectors.pool_list(with_mig=True).order_by("name")
        return csv_response(pools, POOL_COLUMNS, "pools.csv")
    if export == "driver-groups":
        groups = selectors.driver_group_list().order_by("branch")
        return csv_response(groups, DRIVER_GROUP_COLUMNS, "driver-groups.csv")
    form = CudaCheckForm(request.GET or None)
    support = None
    if form.is_bound and form.is_valid():
        support = selectors.pools_supporting_cuda(cuda=form.cleaned_data["cuda"])
    pools = list(selectors.pool_list(with_mig=True).order_by("name"))
    calendar_models = selectors.pool_gpu_models()
    for pool in pools:  # each pool × model it has cards of opens its capacity calendar
        pool.calendar_models = calendar_models.get(pool.pk, [])
    context = {
        "pools": pools,
        "driver_groups": selectors.driver_group_list().order_by("branch"),
        "form": form,
        "support": support,
    }
    name = "pools/pool_list.html#cuda-result" if request.htmx else "pools/pool_list.html"
    response = render(request, name, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_http_methods(["GET", "POST"])
def unrecognised_models(request):
    export = checked_export(request) if request.method == "GET" else None
    form = None
    if request.method == "POST":
        if not may_administer_pools(request.user):
            return HttpResponse("Only pool admins map models.", status=403)
        form = AliasMapForm(request.POST)
        if form.is_valid():
            try:
                count = gpu_model_alias_map(
                    raw_name=form.cleaned_data["raw_model_name"],
                    gpu_model=form.cleaned_data["gpu_model"],
                    actor=request.user,
                )
            except DomainError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(
                    request,
                    f"Mapped {form.cleaned_data['raw_model_name']!r} to "
                    f"{form.cleaned_data['gpu_model'].name}: {count} cards recognised.",
                )
                return redirect("pools:unrecognised-models")
    rows = selectors.unrecognised_model_list()
    if export == "csv":
        columns = [
            Column("raw_model_name", lambda r: r["raw_model_name"]),
            Column("model_candidates", lambda r: " ".join(r["model_candidates"])),
            Column("gpu_count", lambda r: r["gpu_count"]),
            Column("node_count", lambda r: r["node_count"]),
        ]
        return csv_response(rows, columns, "unrecognised-models.csv")
    return render(
        request, "pools/unrecognised_models.html", {"rows": rows, "form": form or AliasMapForm()}
    )


@pool_admin_required
@require_http_methods(["GET", "POST"])
def inventory_import(request):
    form = InventoryUploadForm(request.POST or None, request.FILES or None)
    report, queued, status = None, None, 200
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        # a big file goes to a task; the page polls it (pools/inventory/services/uploads.py)
        run = (
            inventory_upload_queue
            if inventory_import_in_background(upload.size)
            else inventory_import_file
        )
        try:
            outcome = run(
                data=upload.read(),
                source=form.cleaned_data["source"],
                node=form.cleaned_data.get("node") or None,
                pool=form.cleaned_data.get("pool"),
                actor=request.user,
                filename=upload.name,
            )
            if run is inventory_upload_queue:
                queued = outcome
            else:
                report = outcome
        except DomainError as exc:
            form_add_domain_errors(form, exc)
            # htmx swaps only 2xx answers: its fragment shows the error with 200
            status = 200 if request.htmx else 400
    context = {
        "form": form,
        "report": report,
        "upload": queued,
        "imports": selectors.inventory_import_list()[:20],
    }
    name = "pools/inventory_import.html#result" if request.htmx else "pools/inventory_import.html"
    response = render(request, name, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


@pool_admin_required
@require_http_methods(["GET"])
def inventory_upload(request, pk: int):
    """A background import: its progress while it runs (htmx polls the fragment), then the
    report, as the import page shows a synchronous one."""
    upload = selectors.inventory_upload_list().filter(pk=pk).first()
    if upload is None:
        raise Http404("No such background import.")
    report = ImportReport.from_dict(upload.report) if upload.report else None
    context = {"upload": upload, "upload_report": report}
    name = "pools/_inventory_upload.html" if request.htmx else "pools/inventory_upload.html"
    response = render(request, name, context)
    patch_vary_headers(response, ["HX-Request"])
    return response
