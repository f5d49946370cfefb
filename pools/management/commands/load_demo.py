"""``manage.py load_demo``: demo users, teams, pools and fleet, all through the real importers.

Imports every nvidia-smi capture in ``tests/fixtures/nvidia-smi/`` (one node per capture),
then the generated fleet of :mod:`pools.management.demo` as nvidia-smi CSV, slurmrestd JSON and a
Kubernetes NodeList. Safe to run twice (the second run reports nodes unchanged). Demo users
(``admin``, ``alice``, ``bob``, password ``demo``) are for the demo only.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from pools.advisor.models import AdvisorRun
from pools.advisor.services import advisor_pass
from pools.calendar.services import team_calendar_feed_create
from pools.calibration.services import calibration_refresh
from pools.capacity.availability import pool_free_cards
from pools.capacity.generation import allocations_changed
from pools.capacity.lifecycle import RUNNING_STATUSES
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.allocations import allocation_lifecycle_sweep
from pools.capacity.services.requests import (
    capacity_request_approve,
    capacity_request_create,
    capacity_request_reject,
)
from pools.classes.models import WorkloadClass
from pools.classes.seed import seed_classes
from pools.clusters.models import Cluster, ClusterError
from pools.common.choices import AllocationStatus, IdleFindingState, TeamRole
from pools.elastic.models import BurstOptIn, ElasticPolicy, ScaleEvent, SignalReading
from pools.elastic.selectors import held_timelines
from pools.elastic.services import (
    elastic_apply,
    elastic_hand_back_run,
    elastic_policy_create,
    scaling_policy,
)
from pools.inventory.models import DriverGroup, Gpu, GpuModel, Pool
from pools.inventory.services.import_files import inventory_import_file, inventory_import_files
from pools.maintenance.models import MaintenanceWindow
from pools.maintenance.selectors import WaveAsk
from pools.maintenance.services.windows import maintenance_waves_create
from pools.management.backdate import demo_clock
from pools.management.demo import (
    CLUSTER_HEALTH,
    CLUSTERS,
    DEMO_HOME_CARDS,
    DEMO_SERVED,
    POOLS,
    demo_advisor_rollups,
    demo_burst_once,
    demo_elastic_history,
    demo_fleet,
    demo_gpu_rollups,
    demo_serving_answers,
)
from pools.overrides.models import OverrideKind, TemporaryOverride
from pools.overrides.services import override_create
from pools.reclamation.evaluate import evaluate_group, utilisation_sparkline
from pools.reclamation.models import (
    IdleFinding,
    IdleGroupEvaluation,
    IdleScanRun,
    ReclamationPolicy,
)
from pools.reclamation.services.scan import (
    finding_detail,
    percent_decimal,
    policy_thresholds,
)
from pools.recurring.models import Recurrence, RecurringReservation
from pools.recurring.services.reservations import recurring_reservation_create
from pools.serving.models import ServedModel, ServingRollup
from pools.serving.rollup import held_at
from pools.serving.services import bucket_floor, serving_coverage_note, serving_rollup_replay
from pools.tenancy.models import Membership, Team
from pools.waiting.services import pending_work_store
from scheduler_adapters.kueue_workloads import PendingWorkload, QuotaShortfall
from scheduler_adapters.prometheus import DeviceUsage, Sample
from scheduler_adapters.records import JobQueue, PendingJob, RunningJob
from scheduler_adapters.types import InventorySource

IDLE_HISTORY = timedelta(days=2)
"""How long nlp's serving and shaped fine-tune and vision's pre-training have run when the demo
is loaded: the idle findings' series and windows and the advisor's rows fit in it."""
CAPTURES = Path(settings.BASE_DIR) / "tests" / "fixtures" / "nvidia-smi"
TEAMS = [
    ("nlp", "NLP", "CC-4100"),
    ("vision", "Vision", "CC-4200"),
    ("platform", "Platform", "CC-1000"),
]


class Command(BaseCommand):
    help = "Load demo users, teams, pools and a GPU fleet (demo only: password 'demo')."

    def handle(self, *args, **options):
        with transaction.atomic():
            self._users_and_teams()
            self._pools()
            self._clusters()
        for path in sorted(CAPTURES.glob("*.txt")):
            # linux-x86_64__nvidia-h100-mig__590.48.01.txt -> lab-h100-mig
            host = "lab-" + path.stem.split("__")[1].removeprefix("nvidia-").removeprefix(
                "geforce-"
            )
            report = inventory_import_file(
                data=path.read_bytes(),
                source=InventorySource.NVIDIA_SMI,
                node=host,
                filename=path.name,
            )
            self._say(path.name, report)
        captures, slurm_json, k8s_json = demo_fleet()
        self._say(
            "nvidia-smi CSV of the generated nodes",
            inventory_import_files(
                files=[(f"{c.hostname}.csv", c.csv.encode(), c.hostname) for c in captures],
                source=InventorySource.NVIDIA_SMI,
            ),
        )
        self._say(
            "slurmrestd nodes",
            inventory_import_file(
                data=slurm_json.encode(), source=InventorySource.SLURM, filename="slurm-nodes.json"
            ),
        )
        self._say(
            "kubernetes nodes",
            inventory_import_file(
                data=k8s_json.encode(), source=InventorySource.KUBERNETES, filename="k8s-nodes.json"
            ),
        )
        self._requests()
        self._idle_findings()
        self._elastic()
        self._recurring()
        self._maintenance()
        self._override()
        self._serving()
        self._waiting()
        self._advisor()
        self._inference_pool_full()

    def _requests(self):
        """A few requests in every state, made through the services as people would."""
        if CapacityRequest.objects.exists():
            return
        users = {u.username: u for u in get_user_model().objects.all()}
        teams = {t.slug: t for t in Team.objects.all()}
        pools = {p.slug: p for p in Pool.objects.all()}
        models = {m.slug: m for m in GpuModel.objects.all()}
        seed_classes(WorkloadClass)  # a flushed test database has lost the migration's rows
        classes = {c.slug: c for c in WorkloadClass.objects.all()}
        now = timezone.now().replace(second=0, microsecond=0)
        day = timedelta(days=1)

        def ask(user, team, kind, pool, model, cards, start, days, why, submit=True, **extra):
            fields = RequestFields(
                team=teams[team],
                workload_kind=kind,
                card_count=cards,
                starts_at=start,
                ends_at=extra.pop("ends_at", start + days * day),
                justification=why,
                pool=pools[pool],
                gpu_model=models[model],
                **extra,
            )
            return capacity_request_create(actor=users[user], fields=fields, submit=submit)

        admin = users["admin"]
        soon = now + timedelta(minutes=1)
        # vision's pre-training, granted IDLE_HISTORY ago like nlp's two below: no job has
        # used its cards since, so the idle page's dry-run finding stands on it (_idle_findings)
        with demo_clock(now - IDLE_HISTORY - timedelta(minutes=1)):
            training = ask(
                "bob",
                "vision",
                "training",
                "train-slurm",
                "a100_80g_sxm",
                16,
                now - IDLE_HISTORY,
                14,
                "Detector pre-training, 2 nodes.",
                ends_at=soon + 14 * day,
            )
            capacity_request_approve(request=training, actor=admin, reason="fits the quarter plan")
        # nlp's serving here and its shaped fine-tune below have run for two days already (the
        # idle findings and the advisor's rows stand on them): asked, approved and granted two
        # days ago, as the audit trail then says (pools.management.backdate), and ending where
        # a grant from now would end them.
        with demo_clock(now - IDLE_HISTORY - timedelta(minutes=1)):
            serving = ask(
                "alice",
                "nlp",
                "inference",
                "infer-k8s",
                "l40s",
                8,
                now - IDLE_HISTORY,
                2,
                "Chat assistant serving (Qwen2.5-14B).",
                workload_class=classes["production"],
                ends_at=soon + 2 * day,
            )
            capacity_request_approve(request=serving, actor=admin)
        # nlp's retriever evaluation on four 4090s, granted with them: one job at a time keeps one
        # card at work, the others idle, so the idle page's finding that is reclaimed in a few
        # hours stands on it (_idle_findings), not on the chat serving above, which is
        # overloaded (_serving)
        with demo_clock(now - IDLE_HISTORY - timedelta(minutes=1)):
            evaluation = ask(
                "alice",
                "nlp",
                "training",
                "dev-4090",
                "rtx4090",
                4,
                now - IDLE_HISTORY,
                2,
                "Retriever evaluation runs, one checkpoint at a time.",
                ends_at=soon + 2 * day,
            )
            capacity_request_approve(request=evaluation, actor=admin)
        # Workload classes (issue 36): production serving on L40S (above), batch on the 4090s.
        batch = ask(
            "bob",
            "vision",
            "training",
            "dev-4090",
            "rtx4090",
            8,
            soon,
            3,
            "Nightly evaluation sweeps over the detector checkpoints.",
            workload_class=classes["batch"],
        )
        capacity_request_approve(request=batch, actor=admin)
        later = ask(
            "bob",
            "vision",
            "training",
            "train-slurm",
            "h800_sxm",
            16,
            now + 10 * day,
            21,
            "Video model fine-tune after the data freeze.",
        )
        capacity_request_approve(
            request=later,
            actor=admin,
            card_count=8,
            reason="8 of 16 now; ask again when the H800 queue clears",
        )
        # A shaped request (TP=4 on one NVLink domain): placed on half of one 8-card node, so the
        # dashboard's stranded capacity shows the other half, unusable for a 1 × 8 job.
        with demo_clock(now - IDLE_HISTORY - timedelta(minutes=1)):  # see serving's
            shaped = ask(
                "alice",
                "nlp",
                "training",
                "train-slurm",
                "a100_80g_sxm",
                4,
                now - IDLE_HISTORY,
                10,
                "Fine-tune Llama-3.1-70B with LoRA at TP=4 on one node.",
                cards_per_node=4,
                node_count=1,
                one_nvlink_domain=True,
                ends_at=soon + 10 * day,
            )
            capacity_request_approve(request=shaped, actor=admin)
        ask(
            "alice",
            "nlp",
            "inference",
            "infer-k8s",
            "l40s",
            2,
            now + 7 * day,
            7,
            "Evaluation endpoint for the new retriever.",
        )
        ask(
            "alice",
            "nlp",
            "training",
            "train-slurm",
            "h800_sxm",
            32,
            now + 3 * day,
            10,
            "Continued pre-training run.",
        )
        rejected = ask(
            "bob",
            "vision",
            "training",
            "dev-4090",
            "rtx4090",
            4,
            now + 2 * day,
            30,
            "Hyper-parameter sweep.",
        )
        capacity_request_reject(
            request=rejected, actor=admin, reason="30 days of the dev pool is too long; split it up"
        )
        ask(
            "alice",
            "nlp",
            "training",
            "dev-4090",
            "rtx4090d",
            2,
            now + day,
            3,
            "Tokenizer experiments.",
            submit=False,
        )
        allocation_lifecycle_sweep(now=now + timedelta(minutes=2))
        self.stdout.write(f"requests: {CapacityRequest.objects.count()} demo requests")

    def _elastic(self):
        """An inference team's elastic allocation (vision: 4 L40S guaranteed, up to 12) with
        three days of what the loop would have recorded: a reading a minute of the demo
        traffic (pools.management.demo.demo_elastic_history: quiet nights, two daily peaks) under
        the cards the loop's own rules held, and the scale events those rules decided from them.
        The what-if replays these readings (the demo has no Prometheus). The events are then
        applied the way the pool's quota backend applies them; without a Kubernetes
        connection that says they are held in the portal only."""
        if ElasticPolicy.objects.exists():
            return
        users = {u.username: u for u in get_user_model().objects.all()}
        now = timezone.now().replace(second=0, microsecond=0)
        history_days = 3
        start = now - timedelta(days=history_days, hours=1)
        with demo_clock(start - timedelta(minutes=1)):  # asked and granted then (backdate.py)
            request = capacity_request_create(
                actor=users["bob"],
                fields=RequestFields(
                    team=Team.objects.get(slug="vision"),
                    workload_kind="inference",
                    card_count=4,
                    starts_at=start,
                    ends_at=now + timedelta(days=14),
                    justification="Image-captioning API (Qwen2-VL-7B, TP=2), autoscaled.",
                    pool=Pool.objects.get(slug="infer-k8s"),
                    gpu_model=GpuModel.objects.get(slug="l40s"),
                ),
            )
            allocation = capacity_request_approve(request=request, actor=users["admin"])
        Allocation.objects.filter(pk=allocation.pk).update(status=AllocationStatus.ACTIVE)
        allocations_changed()  # an UPDATE sends no post_save
        allocation.refresh_from_db()
        policy = elastic_policy_create(
            allocation=allocation,
            actor=users["bob"],
            ceiling_cards=12,
            step_cards=2,
            cards_per_replica=2,
            min_replicas=2,
            per_card_tok_s=Decimal("420"),
            deployment="qwen2-vl-captions",
        )
        minutes = history_days * 24 * 60
        start = now - timedelta(minutes=minutes - 1)
        readings, changes, last = demo_elastic_history(
            scaling_policy(policy), start=start.timestamp(), minutes=minutes
        )

        def aware(t: float) -> datetime:
            return datetime.fromtimestamp(t, tz=now.tzinfo)

        SignalReading.objects.bulk_create(
            SignalReading(policy=policy, read_at=aware(at), util_pct=util, latency_ms=latency,
                          request_s=rate, cards_held=cards)
            for at, util, latency, rate, cards in readings
        )  # fmt: skip
        # the first peak above 8 cards found the inference pool full: vision (opted in) put
        # the cards above 8 in the rented burst pool, handed back first as the peak ended
        burst_pool = Pool.objects.get(slug="burst-cloud")
        BurstOptIn.objects.get_or_create(team=allocation.team, pool=burst_pool)
        placed = demo_burst_once(changes)
        ScaleEvent.objects.bulk_create(
            ScaleEvent(
                policy=policy,
                decided_at=aware(d.at),
                action=str(d.action),
                reason=str(d.reason),
                cards_from=d.cards_from,
                cards_to=d.cards_to,
                burst_pool=burst_pool if burst else None,
                burst_cards_to=burst,
                effective_at=aware(d.at),
                message=d.message
                + (
                    f"; {burst} card(s) in burst pool {burst_pool.name} at its price"
                    if burst
                    else ""
                ),
                numbers=d.numbers(),
            )
            for d, burst in zip(changes, placed, strict=True)
        )
        if placed and placed[-1]:
            policy.burst_pool, policy.burst_cards = burst_pool, placed[-1]
        policy.cards_held = readings[-1][4]
        policy.last_scaled_at = aware(changes[-1].at) if changes else None
        policy.borrowed_since = (
            policy.last_scaled_at if policy.cards_held > allocation.card_count else None
        )
        policy.last_decision = {**last.numbers(), "decided_at": aware(last.at).isoformat()}
        policy.save()
        elastic_apply(policy_id=policy.pk, now=now)
        ups = sum(d.action == "up" for d in changes)
        self.stdout.write(
            f"elastic allocation #{allocation.pk}: {minutes} readings, {ups} ups and "
            f"{len(changes) - ups} downs over {history_days} days, "
            f"{min(r[4] for r in readings)}-{max(r[4] for r in readings)} cards, "
            f"burst once: up to {max(placed, default=0)} card(s) in {burst_pool.name}"
        )

    def _inference_pool_full(self):
        """Platform's re-embedding batch holds the inference pool's L40S but the 4 vision's
        elastic allocation may still borrow over its floor of 4 (``DEMO_HOME_CARDS`` = 8 at
        home), for two days or until the course's first lab session, whichever is sooner:
        36 usable L40S (40, less a node of 4 down) - nlp's 8 - vision's 4 - 4 = 20 cards. So
        the pool is full now, as it was the first time vision burst: the what-if on vision's
        allocation replays its peaks of 10 cards with 8 at home and 2 in the burst pool.
        Approved through the services like any request; the guarantee takes vision's borrowed
        cards above 8 back at once (:func:`pools.elastic.services.elastic_hand_back_run`, which
        the approval queues on commit; called here too, for a test's database never commits,
        and once done it finds nothing more to take)."""
        pool, model = Pool.objects.get(slug="infer-k8s"), GpuModel.objects.get(slug="l40s")
        platform = Team.objects.get(slug="platform")
        if Allocation.objects.filter(team=platform, pool=pool, gpu_model=model).exists():
            return
        policy = ElasticPolicy.objects.select_related("allocation").get()
        now = timezone.now().replace(second=0, microsecond=0)
        start = now + timedelta(minutes=1)
        course = RecurringReservation.objects.get(pool=pool, gpu_model=model)
        course_start = datetime.combine(
            course.first_date, course.start_time, tzinfo=ZoneInfo(course.time_zone)
        )
        end = min(start + timedelta(days=2), course_start)
        lend = DEMO_HOME_CARDS - policy.allocation.card_count
        free = pool_free_cards(pool=pool, gpu_model=model, start=start, end=end)
        if free <= lend:  # a demo database loaded before and used since: already as full
            return
        admin = get_user_model().objects.get(username="admin")
        request = capacity_request_create(
            actor=admin,
            fields=RequestFields(
                team=platform,
                workload_kind="inference",
                card_count=free - lend,
                starts_at=start,
                ends_at=end,
                justification="Re-embedding the document store with the new retriever (batch).",
                pool=pool,
                gpu_model=model,
            ),
        )
        capacity_request_approve(request=request, actor=admin, reason="fits before the course")
        elastic_hand_back_run(pool_id=pool.pk, gpu_model_id=model.pk, starts_at=start, ends_at=end)
        until = end.astimezone(UTC)
        self.stdout.write(
            f"inference pool: platform holds {free - lend} L40S until {until:%Y-%m-%d %H:%M} UTC; "
            f"{lend} left to lend"
        )

    def _recurring(self):
        """A course's recurring reservation: nlp's 8 L40S every weekday 09:00-18:00 Berlin
        time for twelve weeks from next Monday, checked over every occurrence like any."""
        if RecurringReservation.objects.exists():
            return
        today = timezone.localdate()
        monday = today + timedelta(days=7 - today.weekday())
        recurring_reservation_create(
            actor=get_user_model().objects.get(username="admin"),
            team=Team.objects.get(slug="nlp"),
            pool=Pool.objects.get(slug="infer-k8s"),
            gpu_model=GpuModel.objects.get(slug="l40s"),
            name="LLM course lab sessions",
            card_count=8,
            recurrence=Recurrence.WEEKDAY,
            time_zone="Europe/Berlin",
            first_date=monday,
            last_date=monday + timedelta(weeks=12, days=-3),
            start_time=time(9),
            end_time=time(18),
        )
        # nlp's secret calendar feed link, as alice makes it on the team's calendar page
        alice = get_user_model().objects.get(username="alice")
        team_calendar_feed_create(actor=alice, team=Team.objects.get(slug="nlp"))

    def _override(self):
        """A temporary override (issue 32): nlp's A100 ceiling in the training pool raised from
        its 4 cards to 8 until Friday 18:00 for a deadline, through the service as an admin
        would; the team dashboard shows it."""
        if TemporaryOverride.objects.exists():
            return
        now = timezone.now()
        friday = timezone.localdate() + timedelta(days=(4 - timezone.localdate().weekday()) % 7)
        until = timezone.make_aware(datetime.combine(friday, time(18)))
        if until <= now + timedelta(days=1):
            until += timedelta(weeks=1)
        override_create(
            actor=get_user_model().objects.get(username="admin"),
            team=Team.objects.get(slug="nlp"),
            pool=Pool.objects.get(slug="train-slurm"),
            kind=OverrideKind.CEILING,
            gpu_model=GpuModel.objects.get(slug="a100_80g_sxm"),
            cards=8,
            until=until,
            reason="LoRA sweep for the workshop paper deadline",
        )

    def _maintenance(self):
        """A planned driver upgrade of the R535 group (the training pool's A100 nodes) in
        waves of two nodes, 06:00-12:00 UTC on successive days from the Saturday after next,
        planned so that no approved allocation loses its cards
        (:mod:`pools.maintenance.waves`)."""
        if MaintenanceWindow.objects.exists():
            return
        today = timezone.now().astimezone(UTC).date()
        saturday = today + timedelta(days=(5 - today.weekday()) % 7 + 7)
        maintenance_waves_create(
            actor=get_user_model().objects.get(username="admin"),
            title="Driver R570 upgrade",
            reason="R535 leaves NVIDIA support; CUDA 12.8 needs R570.",
            ask=WaveAsk(
                driver_group=DriverGroup.objects.get(branch=535),
                pool=Pool.objects.get(slug="train-slurm"),
                first_start=datetime.combine(saturday, time(6), tzinfo=UTC),
                length=timedelta(hours=6),
                gap=timedelta(hours=18),
                per_wave=2,
                max_slots=14,
            ),
        )

    def _serving(self):
        """Recorded serving answers for the two running inference allocations, from each one's
        start to now, rolled up by the same code as a pass (pools.serving.services
        .serving_rollup_replay): vision's elastic vLLM endpoint is healthy; nlp's SGLang chat
        serving is overloaded (a long queue at the peaks, a full KV cache, retractions, free
        framebuffer falling through the days), so the Serving panels show both shapes
        without Prometheus."""
        if ServingRollup.objects.filter(allocation__pool__slug="infer-k8s").exists():
            return  # loaded before (the idle pre-training's rows are _idle_findings')
        now = timezone.now()
        end = bucket_floor(now)
        rng = random.Random(30)
        recorded = []
        serving = Allocation.objects.filter(
            status__in=RUNNING_STATUSES, pool__slug="infer-k8s", team__slug__in=["nlp", "vision"]
        ).select_related("team")
        # vision's is elastic: each bucket is served by the cards its scale events held then
        timelines = held_timelines(allocation_ids=[a.pk for a in serving])
        for allocation in serving:
            first = bucket_floor(allocation.starts_at)
            buckets = int((end - first).total_seconds() // 300)
            for index in range(buckets):
                start = first + timedelta(minutes=5 * index)
                timeline = timelines.get(allocation.pk)
                held = held_at(timeline, start.timestamp() + 150) if timeline else None
                series = demo_serving_answers(
                    namespace=f"team-{allocation.team.slug}",
                    at=(start + timedelta(minutes=5)).timestamp(),
                    cards=held or allocation.card_count,
                    traffic_cards=allocation.card_count,
                    troubled=allocation.team.slug == "nlp",
                    rng=rng,
                    age=index / max(buckets - 1, 1),
                )
                recorded.append((start, {"recorded": series}))
        self.stdout.write(f"serving rollups: {serving_rollup_replay(recorded=recorded)} rows")
        # What each serves (their requests' justifications), so the calibration pass can set
        # measured against sized: vision's Qwen2-VL-7B as the catalogue's Qwen2.5-7B.
        for allocation in serving:
            model_id, precision, tp, engine = DEMO_SERVED[allocation.team.slug]
            ServedModel.objects.get_or_create(
                allocation=allocation,
                defaults={"model_id": model_id, "precision": precision, "tp": tp, "engine": engine},
            )
        self.stdout.write(f"calibration: {calibration_refresh(now=now)}")

    def _advisor(self):
        """Serving rows for nlp's four A100 (pools.management.demo.demo_advisor_rollups: free
        framebuffer decaying over the days, a batching limit in the last 45 minutes), then the
        advisor's passes every two hours over the last day and one now, so findings show when they
        opened and which closed again."""
        if AdvisorRun.objects.exists():
            return
        now = timezone.now()
        end = bucket_floor(now)
        evaluation = Allocation.objects.filter(
            status__in=RUNNING_STATUSES, pool__slug="train-slurm", team__slug="nlp"
        ).first()
        if evaluation is not None and not evaluation.serving_rollups.exists():
            rows = demo_advisor_rollups(
                start=bucket_floor(evaluation.starts_at),
                end=end,
                cards=evaluation.card_count,
                rng=random.Random(31),
            )
            stored = [ServingRollup(allocation=evaluation, **row) for row in rows]
            with transaction.atomic():  # as a pass stores them: the API's list joins coverage
                ServingRollup.objects.bulk_create(stored)
                serving_coverage_note(stored)
        for hours in range(24, 0, -2):
            advisor_pass(now=now - timedelta(hours=hours))
        run = advisor_pass(now=now)
        self.stdout.write(
            f"advisor: {run.opened + run.updated} live findings over {run.allocations} "
            f"allocations; undecided {run.undecided}"
        )

    def _idle_findings(self):
        """Reclamation policies and the findings an idle scan would have left, with the series
        it would have read (a fake dcgm-exporter: a few busy cards, the rest near 0 %), so the
        idle page shows every state: reclaim in a few hours, dry run past its grace, resolved.
        They stand on two demo allocations granted :data:`IDLE_HISTORY` ago (:meth:`_requests`)
        whose cards no job has used: nlp's retriever evaluation on four 4090s and vision's
        pre-training. Each one's readings of the whole time are kept as its serving rollups, so
        its serving page shows the series its findings were judged on (nlp's chat serving and
        shaped fine-tune, busy, have none: their rows are :meth:`_serving`'s and
        :meth:`_advisor`'s)."""
        if IdleFinding.objects.exists():
            return
        pools = {p.slug: p for p in Pool.objects.all()}
        ReclamationPolicy.objects.get_or_create(
            pool=pools["infer-k8s"], defaults={"dry_run": False, "grace_hours": 24}
        )
        dev_policy, _ = ReclamationPolicy.objects.get_or_create(
            pool=pools["dev-4090"], defaults={"dry_run": False, "grace_hours": 24}
        )
        training_policy, _ = ReclamationPolicy.objects.get_or_create(pool=pools["train-slurm"])
        now = timezone.now().replace(second=0, microsecond=0)
        granted = Allocation.objects.filter(
            status__in=RUNNING_STATUSES, starts_at__lte=now - IDLE_HISTORY
        ).select_related("pool", "team", "gpu_model")
        evaluation = granted.filter(pool__slug="dev-4090", team__slug="nlp").first()
        training = granted.filter(pool__slug="train-slurm", team__slug="vision").first()
        if evaluation is None or training is None:
            return
        rng = random.Random(7)
        hour = timedelta(hours=1)

        def finding(allocation, policy, seen_at, devices, **fields):
            thresholds = policy_thresholds(policy)
            group = evaluate_group(
                devices, held=allocation.card_count, end=seen_at.timestamp(), t=thresholds
            )
            peaks = [c.peak_util_pct for c in group.cards if c.peak_util_pct is not None]
            fields.setdefault("state", IdleFindingState.OPEN)
            return IdleFinding.objects.create(
                allocation=allocation,
                last_seen_at=seen_at,
                dry_run=policy.dry_run,
                certainly_idle=group.certainly_idle,
                mean_util_pct=percent_decimal(group.mean_util_pct),
                peak_util_pct=percent_decimal(max(peaks) if peaks else None),
                card_count=allocation.card_count,
                cards_in_use=min(group.cards_busy, allocation.card_count),
                evaluation=IdleGroupEvaluation.objects.create(
                    evaluated_at=seen_at,
                    detail=finding_detail(
                        group,
                        utilisation_sparkline(devices, end=seen_at.timestamp(), t=thresholds),
                    ),
                ),
                **fields,
            )

        def keep_as_rollups(allocation, readings, policy, seen_at):
            """The readings as the allocation's serving rollups, from its start to ``seen_at``."""
            rows = demo_gpu_rollups(
                readings,
                start=bucket_floor(allocation.starts_at) + timedelta(minutes=5),
                end=bucket_floor(seen_at),
                busy_pct=float(policy.idle_below_pct),
            )
            stored = [ServingRollup(allocation=allocation, **row) for row in rows]
            with transaction.atomic():  # as a pass stores them: the API's list joins coverage
                ServingRollup.objects.bulk_create(stored)
                serving_coverage_note(stored)

        # nlp's retriever evaluation: one of its 4 cards at work until 30 h ago (idle: seen from
        # 34 h ago), all 4 until 20 h ago (busy again: that finding resolved 29 h ago), then one
        # again (idle: seen from 19 h ago, warned then, reclaimed in 5 h under a 24 h grace)
        seen = now - timedelta(minutes=3)
        readings = _demo_history(
            evaluation,
            [(now - 30 * hour, 1), (now - 20 * hour, 4), (seen, 1)],
            rng,
        )
        finding(
            evaluation,
            dev_policy,
            seen,
            readings,
            first_seen_at=now - 19 * hour,
            warned_at=now - 19 * hour,
        )
        finding(
            evaluation,
            dev_policy,
            now - 30 * hour,
            readings,
            state=IdleFindingState.RESOLVED,
            first_seen_at=now - 34 * hour,
            warned_at=now - 34 * hour,
            closed_at=now - 29 * hour,
            note="busy again: 4 cards busy",
        )
        keep_as_rollups(evaluation, readings, dev_policy, seen)
        # vision's 16 A100 under a dry-run policy: idle since they were granted, would have been
        # ended 6 h ago; one series of the whole time, read for the finding and kept as rollups
        idle_since = training.starts_at
        minutes = int((seen - idle_since).total_seconds() // 60)
        readings = _demo_series(training, 0, seen, minutes, rng)
        finding(
            training,
            training_policy,
            seen,
            readings,
            first_seen_at=now - 30 * hour,
            would_reclaim_at=now - 6 * hour,
            note="dry run: would end it",
        )
        keep_as_rollups(training, readings, training_policy, seen)
        # the scan record such a scan leaves, so the page does not say "no scan has run" above
        # the findings it shows (a demo has no Prometheus: the note says so)
        IdleScanRun.objects.create(
            started_at=now - timedelta(minutes=3),
            seconds=0.4,
            allocations=2,
            idle=2,
            would_reclaim=1,
            notes=["Demo data: this record and its findings were written by load_demo, not by a "
                   "scan of Prometheus (set PROMETHEUS_URL for real scans)."],
        )  # fmt: skip
        self.stdout.write(f"idle findings: {IdleFinding.objects.count()} demo findings")

    def _waiting(self):
        """Waiting work as the refresh task would store it (issue #33): nlp's jobs over its cap
        of 8 A100 (held by two running jobs), one waiting for a whole node, one with a reason
        the portal has no sentence for; vision's Kueue workloads short of quota and of room in
        one NVLink domain."""
        now = timezone.now().replace(second=0, microsecond=0)

        def pending(job_id, reason, cards, **extra):
            values = dict(
                job_id=job_id, name=f"train-{job_id}", account="nlp", user="alice",
                partition="train", reason=reason, reason_detail=None,
                gpus_requested={"a100": cards}, nodes_requested=1,
                submit=now - timedelta(minutes=job_id % 50), expected_start=None,
                time_limit_min=720, priority=1, qos="normal", dependency=None, reservation=None,
            )  # fmt: skip
            return PendingJob(**(values | extra))

        def running(job_id, cards, hours):
            start = now - timedelta(hours=2)
            end = now + timedelta(hours=hours)
            return RunningJob(job_id, "nlp", "bob", "train", {"a100": cards}, start, end)

        queue = JobQueue(
            pending=(
                pending(4125, "AssocGrpGRES", 2),
                pending(4126, "Resources", 8, expected_start=now + timedelta(hours=5)),
                pending(4127, "Priority", 1),
                pending(4128, "BurstBufferStageIn", 1, reason_detail="staging /scratch/nlp"),
            ),
            running=(running(4123, 4, 3), running(4124, 4, 6)),
        )
        pending_work_store(scheduler="slurm", queue=queue, caps={"nlp": {"a100": 8}}, now=now)
        workloads = [
            PendingWorkload(
                "team-vision", "job-finetune-7b-5c1f2", "default", 4, now - timedelta(minutes=9),
                "QuotaReserved", "Pending",
                "couldn't assign flavors to pod set main: insufficient unused quota for "
                "nvidia.com/gpu in flavor nvidia-l40s, 2 more needed",
                now, QuotaShortfall("nvidia-l40s", more_needed=2),
            ),
            PendingWorkload(
                "team-vision", "job-nvl-8gpu-6e6e2", "default", 8, now - timedelta(minutes=4),
                "QuotaReserved", "TopologyPlacementFailed",
                'couldn\'t assign flavors to pod set main: topology "nvlink-domain" doesn\'t '
                "allow to fit any of 1 pod(s)",
                now, None,
            ),
        ]  # fmt: skip
        pending_work_store(scheduler="kubernetes", workloads=workloads, now=now)

    def _say(self, name, report):
        self.stdout.write(
            f"{name}: {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged, {len(report.rejected)} rejected"
        )

    def _users_and_teams(self):
        users = get_user_model().objects
        admin, _ = users.get_or_create(
            username="admin",
            defaults={"is_staff": True, "is_superuser": True, "email": "admin@example.com"},
        )
        alice, _ = users.get_or_create(username="alice", defaults={"email": "alice@example.com"})
        bob, _ = users.get_or_create(username="bob", defaults={"email": "bob@example.com"})
        for user in (admin, alice, bob):
            user.set_password("demo")
            user.save()
        teams = {}
        for slug, name, cost_centre in TEAMS:
            teams[slug], _ = Team.objects.get_or_create(
                slug=slug, defaults={"name": name, "cost_centre": cost_centre}
            )
        Membership.objects.get_or_create(
            team=teams["nlp"], user=alice, defaults={"role": TeamRole.MEMBER}
        )
        Membership.objects.get_or_create(
            team=teams["vision"], user=bob, defaults={"role": TeamRole.MANAGER}
        )

    def _clusters(self) -> None:
        """The demo's four clusters and their pools (:data:`pools.management.demo.CLUSTERS`), and
        the health their last checks would have found
        (:data:`pools.management.demo.CLUSTER_HEALTH`)."""
        now = timezone.now()
        for spec in CLUSTERS:
            spec = dict(spec)
            slug, pools = spec.pop("slug"), spec.pop("pools")
            cluster, _ = Cluster.objects.get_or_create(slug=slug, defaults=spec)
            Pool.objects.filter(slug__in=pools, cluster__isnull=True).update(cluster=cluster)
        for slug, status, reason, version, answered, expires, errors in CLUSTER_HEALTH:
            cluster = Cluster.objects.get(slug=slug)
            if cluster.checked_at is not None:
                continue  # loaded before: keep what was recorded since
            Cluster.objects.filter(pk=cluster.pk).update(
                status=status,
                status_reason=reason,
                api_version_served=version,
                checked_at=now - timedelta(minutes=5),
                reachable_at=now - timedelta(minutes=answered),
                reconciled_at=now - timedelta(minutes=answered + 3),
                inventory_imported_at=now - timedelta(minutes=answered + 3),
                credential_expires_at=now + timedelta(days=expires) if expires else None,
            )
            ClusterError.objects.bulk_create(
                ClusterError(
                    cluster=cluster, operation=op, message=text, at=now - timedelta(minutes=ago)
                )
                for ago, op, text in errors
            )

    def _pools(self) -> None:
        for spec in POOLS:
            spec = dict(spec)
            slug = spec.pop("slug")
            Pool.objects.get_or_create(slug=slug, defaults=spec)


def _demo_history(allocation, pieces, rng) -> list[DeviceUsage]:
    """The allocation's readings from its start, one a minute, in pieces ``(end, busy)`` one
    after the other (:func:`_demo_series` each: its first ``busy`` cards at work), joined card by
    card; a piece's first minute is the one before's last, read once."""
    start, parts = allocation.starts_at, []
    for end, busy in pieces:
        minutes = int((end - start).total_seconds() // 60)
        parts.append(_demo_series(allocation, busy, end, minutes, rng))
        start = end
    joined = parts[0]
    for part in parts[1:]:
        joined = [
            replace(
                a,
                util_pct=a.util_pct + b.util_pct[1:],
                fb_used_mib=a.fb_used_mib + b.fb_used_mib[1:],
            )
            for a, b in zip(joined, part, strict=True)
        ]
    return joined


def _demo_series(allocation, busy, end, window_minutes, rng) -> list[DeviceUsage]:
    """What dcgm-exporter would have reported for the allocation's cards over the window: the
    first ``busy`` cards at 35-70 % with dips, the others at 0-2 % with an empty framebuffer."""
    gpus = list(
        Gpu.objects.filter(node__pool=allocation.pool, gpu_model=allocation.gpu_model)
        .select_related("node")
        .order_by("node__hostname", "index")[: allocation.card_count]
    )
    start = end.timestamp() - window_minutes * 60
    steps = [start + i * 60 for i in range(window_minutes + 1)]
    namespace = (
        f"team-{allocation.team.slug}" if allocation.pool.scheduler == "kubernetes" else None
    )
    devices = []
    for n, gpu in enumerate(gpus):
        level = rng.uniform(35, 70) if n < busy else 0.0
        util = tuple(
            Sample(
                t,
                round(
                    max(0.0, level + rng.uniform(-15, 15))
                    if level
                    else rng.choice((0.0, 0.0, 0.5, 1.0, 2.0)),
                    1,
                ),
            )
            for t in steps
        )
        fb = tuple(Sample(t, rng.uniform(9000, 30000) if level else 0.0) for t in steps)
        devices.append(
            DeviceUsage(
                hostname=gpu.node.hostname,
                uuid=gpu.uuid or f"GPU-demo-{gpu.node.hostname}-{gpu.index}",
                gpu=str(gpu.index),
                model_name=allocation.gpu_model.name,
                gpu_instance_id=None,
                mig_profile=None,
                namespace=namespace,
                pods=(),
                hpc_jobs=(),
                util_source="prof",
                util_pct=util,
                fb_used_mib=fb,
            )
        )
    return devices
