"""A queued run's lifecycle (:mod:`pools.jobs.runs`), on the reclamation what-if as the
concrete run: what its computation returns or raises decides how the run ends."""

from __future__ import annotations

from decimal import Decimal

import pytest
from factories import PoolFactory

from pools.common.errors import InvalidInput, NotFound
from pools.jobs.runs import (
    RunFailed,
    days_refusal,
    params_json,
    queued_run_create,
    queued_run_execute,
)
from pools.reclamation.models import ReclamationWhatIf

pytestmark = pytest.mark.django_db

TASK = "pools.reclamation.tasks.reclamation_whatif_task"


@pytest.fixture
def run(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        made = queued_run_create(
            ReclamationWhatIf, task_name=TASK, actor=None, pool=PoolFactory(), params={"days": 1}
        )
    assert len(queued) == 1  # its task, sent once the transaction commits
    return made


def ended(run):
    return (run.status, run.progress, run.result, run.error, run.error_code)


def test_a_run_is_done_with_what_its_computation_returns_and_keeps_its_progress(run):
    seen = []

    def compute(row, progress):
        seen.append((row.status, row.progress))
        progress(40)
        seen.append(ReclamationWhatIf.objects.get(pk=row.pk).progress)
        return {"answer": 42}

    done = queued_run_execute(ReclamationWhatIf, run_id=run.pk, compute=compute)
    assert seen == [("running", 0), 40]
    assert ended(done) == ("done", 100, {"answer": 42}, "", "")
    assert done.finished_at is not None
    # a redelivered task leaves it as it is: the computation does not run again
    again = queued_run_execute(ReclamationWhatIf, run_id=run.pk, compute=lambda *_: 1 / 0)
    assert ended(again) == ended(done)


@pytest.mark.parametrize(
    "error, expected",
    [
        (RunFailed("no Prometheus", code="unavailable"), ("no Prometheus", "unavailable")),
        (InvalidInput("bad values"), ("bad values", "invalid_input")),
        (
            ZeroDivisionError("division by zero"),
            (
                "The what-if failed with an internal error (ZeroDivisionError); see the logs.",
                "internal",
            ),
        ),
    ],
)
def test_a_run_whose_computation_raises_is_failed_with_the_reason(run, error, expected):
    def compute(row, progress):
        raise error

    failed = queued_run_execute(ReclamationWhatIf, run_id=run.pk, compute=compute)
    assert ended(failed) == ("failed", 100, None, *expected)


def test_a_run_that_is_gone_is_not_found():
    with pytest.raises(NotFound) as missing:
        queued_run_execute(ReclamationWhatIf, run_id=987654, compute=lambda *_: {})
    assert missing.value.message == "No reclamation what-if #987654."


@pytest.mark.parametrize("days", [0, 31, True, "3", 2.0, None])
def test_days_outside_a_whole_1_to_30_are_refused(days):
    assert days_refusal(days, most=30) == "A whole number of days from 1 to 30."


@pytest.mark.parametrize("days", [1, 30])
def test_days_from_1_to_30_are_taken(days):
    assert days_refusal(days, most=30) is None


def test_params_keep_decimals_as_their_text():
    assert params_json({"idle_below_pct": Decimal("30.00"), "grace_hours": 12}) == {
        "idle_below_pct": "30.00",
        "grace_hours": 12,
    }
