"""Kubernetes usage records of a piece of a day wholly inside an allocation priced on use: keyed
and named as the import now writes them, so importing the day again updates them in place.

Before, the Kubernetes import matched reserved allocations only: a day's usage outside them was
one record keyed ``…:<day>[@<span start>]:used`` with no allocation. It now matches allocations
priced on use too (``UsageCatalogue.covering``, the Slurm import's rule): the steps inside one
are a record keyed ``…:alloc<id>`` naming it, the rest stay ``…:used``. A re-import that no
longer writes ``…:used`` would leave the old record beside the new one and charge the day twice.

So a ``…:used`` record whose period (the day's piece) lies wholly inside one such allocation —
in force at its start, its start taken to the whole second, and until its end, as
``UsageCatalogue.on_use_throughout`` decides — takes the key ``…:alloc<id>`` and names it here:
quantity, basis and period unchanged, so statements are unchanged (their lines are per GPU
model and basis, ``billing.charges.STATEMENT_KEY``). Of a piece only partly inside one nobody
can tell which steps were; the import keeps writing its ``…:used`` record (at 0 when all ran
inside), so that one is corrected in place. A key already taken is left alone. The teams'
usage versions of the months changed are raised (what a pool's budget counted moved).
"""

from collections import defaultdict

from django.db import migrations
from django.db.models import F

# pools.capacity.lifecycle.CHARGED_STATUSES and PricingMethod.USED when this was written
CHARGED_STATUSES = ("approved", "provisioning", "active", "expiring", "ended", "reclaimed")
ON_USE = "used"
SUFFIX = ":used"


def _on_use_windows(Allocation):
    """``{(team id, GPU model id): [(starts, ends, id)]}`` of the charged allocations of whole
    cards priced on use, in start order (as ``UsageCatalogue._load_reservations``)."""
    windows = defaultdict(list)
    for a in (
        Allocation.objects.filter(pricing_method=ON_USE, status__in=CHARGED_STATUSES, mig_profile="")
        .only("id", "team_id", "gpu_model_id", "starts_at", "ends_at")
        .order_by("starts_at", "id")
    ):
        windows[(a.team_id, a.gpu_model_id)].append((a.starts_at, a.ends_at, a.id))
    return windows


def _throughout(windows, start, end):
    """The id of the first of ``windows`` in force at ``start`` when it lasts until ``end``."""
    for starts, ends, allocation_id in windows:
        if starts.replace(microsecond=0) <= start < ends:
            return allocation_id if end <= ends else None
    return None


def used_records_name_on_use_allocations(apps, schema_editor):
    Allocation = apps.get_model("pools", "Allocation")
    UsageRecord = apps.get_model("billing", "UsageRecord")
    UsageMonthVersion = apps.get_model("billing", "UsageMonthVersion")
    changed, touched = [], set()
    for (team_id, model_id), windows in _on_use_windows(Allocation).items():
        records = UsageRecord.objects.filter(
            source="kubernetes", basis=ON_USE, allocation__isnull=True, team_id=team_id,
            gpu_model_id=model_id, source_id__endswith=SUFFIX,
            period_start__lt=max(ends for _, ends, _ in windows),
            period_end__gt=min(starts for starts, _, _ in windows),
        ).only("id", "team_id", "month", "source_id", "period_start", "period_end")  # fmt: skip
        for record in records.order_by("id"):
            allocation_id = _throughout(windows, record.period_start, record.period_end)
            if allocation_id is None:
                continue
            key = f"{record.source_id[: -len(SUFFIX)]}:alloc{allocation_id}"
            if UsageRecord.objects.filter(source="kubernetes", source_id=key).exists():
                continue
            record.source_id, record.allocation_id = key, allocation_id
            changed.append(record)
            touched.add((record.team_id, record.month))
    UsageRecord.objects.bulk_update(changed, ["source_id", "allocation"], batch_size=2000)
    for team_id, month in sorted(touched):
        version, _ = UsageMonthVersion.objects.get_or_create(team_id=team_id, month=month)
        UsageMonthVersion.objects.filter(pk=version.pk).update(version=F("version") + 1)


def on_use_records_back_to_used(apps, schema_editor):
    """Backwards, for the import before this: every Kubernetes record inside an allocation
    priced on use back to its piece's ``…:used`` record (added to it when the piece has one,
    its period then the two's), so that import finds its keys again."""
    UsageRecord = apps.get_model("billing", "UsageRecord")
    UsageMonthVersion = apps.get_model("billing", "UsageMonthVersion")
    touched = set()
    for record in UsageRecord.objects.filter(
        source="kubernetes", basis=ON_USE, allocation__isnull=False
    ).order_by("id"):
        key = f"{record.source_id.rpartition(':')[0]}{SUFFIX}"
        used = UsageRecord.objects.filter(source="kubernetes", source_id=key).first()
        if used is None:
            record.source_id, record.allocation_id = key, None
            record.save(update_fields=["source_id", "allocation"])
        else:
            used.quantity += record.quantity
            used.period_start = min(used.period_start, record.period_start)
            used.period_end = max(used.period_end, record.period_end)
            used.save(update_fields=["quantity", "period_start", "period_end"])
            record.delete()
        touched.add((record.team_id, record.month))
    for team_id, month in sorted(touched):
        version, _ = UsageMonthVersion.objects.get_or_create(team_id=team_id, month=month)
        UsageMonthVersion.objects.filter(pk=version.pk).update(version=F("version") + 1)


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0016_metrics_url_spans"),
        ("pools", "0058_cluster_check_requested_at"),
    ]

    operations = [
        migrations.RunPython(used_records_name_on_use_allocations, on_use_records_back_to_used),
    ]
