"""The watchdog's decisions (dppca_dask/pipeline/liveness.py) on recorded observations.

The views below were recorded from the probe's answers in real runs (2 workers, cluster.timeout
2 s, so a deadline of 5 s; 6 CPU hogs on 2 cores): a worker whose task held the GIL for 8 s
(its heartbeats stop, its process runs), a worker process stopped with SIGSTOP (its nanny
answers "stopped"), and a worker stopped together with its nanny (the nanny does not answer).
Samples are (age s, psutil status, CPU seconds), oldest first, as the probe reports them.
"""

from __future__ import annotations

import pytest

from dppca_dask.pipeline.liveness import (
    BLIND,
    BLIND_FACTOR,
    GONE,
    PENDING,
    RUNNING,
    STOPPED,
    UNREACHABLE,
    ProcessView,
    judge_scheduler,
    judge_worker,
    worker_ttl,
)

TTL, STALL = 5.0, 60.0

# loaded machine, a task holding the GIL for 8 s: silent past the deadline, its process running
STARVED = [
    ProcessView(5.3, ((2.56, "sleeping", 3.53), (1.05, "sleeping", 3.64))),
    ProcessView(7.09, ((4.35, "sleeping", 3.53), (2.84, "sleeping", 3.64),
                       (1.71, "sleeping", 3.73), (0.51, "running", 3.81))),
    ProcessView(13.64, ((11.2, "sleeping", 3.53), (9.69, "sleeping", 3.64),
                        (8.56, "sleeping", 3.73), (7.36, "running", 3.81),
                        (5.78, "running", 3.88), (4.34, "sleeping", 3.88),
                        (3.31, "sleeping", 3.89), (2.22, "sleeping", 3.89),
                        (1.06, "sleeping", 3.89))),
]
# SIGSTOP of the worker process: its nanny reports it stopped
STOPPED_VIEWS = [
    ProcessView(3.29, ((0.5, "stopped", 2.74),)),
    ProcessView(5.38, ((2.59, "stopped", 2.74), (1.55, "stopped", 2.74), (0.51, "stopped", 2.74))),
]
# SIGSTOP of the worker and its nanny: no answer within the nanny's 5 s
FROZEN_GROUP = [
    ProcessView(7.28, ()),
    ProcessView(7.79, ((0.08, "unreachable", None),)),
]


def test_judge_worker__a_starved_worker_is_never_restarted():
    assert [v.state for v in STARVED] == [RUNNING] * 3
    assert [judge_worker(v, TTL, STALL) for v in STARVED] == ["keep"] * 3
    assert STARVED[-1].frozen == pytest.approx(2.25)  # its CPU time stood still from 3.31 s


def test_judge_worker__a_stopped_worker_is_restarted_past_its_deadline_only():
    assert [judge_worker(v, TTL, STALL) for v in STOPPED_VIEWS] == ["keep", "restart"]


def test_judge_worker__a_worker_whose_nanny_does_not_answer_is_removed():
    assert [v.state for v in FROZEN_GROUP] == [PENDING, UNREACHABLE]
    assert [judge_worker(v, TTL, STALL) for v in FROZEN_GROUP] == ["keep", "remove"]


@pytest.mark.parametrize(("status", "state", "action"), [
    ("zombie", GONE, "remove"), (GONE, GONE, "remove"), ("tracing-stop", STOPPED, "restart"),
    ("disk-sleep", RUNNING, "keep"), ("idle", RUNNING, "keep"), (BLIND, BLIND, "keep"),
])
def test_judge_worker__each_state(status, state, action):
    view = ProcessView(TTL, ((1.0, status, None),))
    assert (view.state, judge_worker(view, TTL, STALL)) == (state, action)


def test_judge_worker__a_hung_process_is_restarted_after_the_stall_timeout():
    # silent and its CPU time standing still: hung (or a task holding the GIL while it waits)
    hung = ProcessView(70.0, ((65.0, "sleeping", 2.0), (30.0, "sleeping", 2.0),
                              (0.5, "sleeping", 2.0)))
    assert hung.frozen == pytest.approx(64.5)
    assert judge_worker(hung, TTL, STALL) == "restart"
    assert judge_worker(hung, TTL, 120.0) == "keep"
    advancing = ProcessView(70.0, ((65.0, "sleeping", 2.0), (0.5, "sleeping", 2.01)))
    assert advancing.frozen == 0.0
    assert judge_worker(advancing, TTL, STALL) == "keep"


def test_judge_worker__an_unseen_worker_waits_a_longer_deadline():
    assert judge_worker(ProcessView(BLIND_FACTOR * TTL - 0.1, ((1.0, BLIND, None),)),
                        TTL, STALL) == "keep"
    assert judge_worker(ProcessView(BLIND_FACTOR * TTL, ((1.0, BLIND, None),)),
                        TTL, STALL) == "restart"


def test_worker_ttl__the_timeout_dasks_interval_and_measured_gaps():
    assert worker_ttl(2, 2) == 5.0  # 10 heartbeats of 0.5 s
    assert worker_ttl(20, 2) == 20.0
    assert worker_ttl(20, 500) == 35.0  # 10 x (500 / 200 + 1)
    assert worker_ttl(2, 2, [0.5] * 63 + [13.97]) == 5.0  # one long gap does not move the median
    assert worker_ttl(2, 2, [13.97]) == 5.0  # nor a first gap alone
    assert worker_ttl(2, 2, [3.0] * 8) == 15.0  # slow heartbeats: a loaded machine


def test_judge_scheduler__stopped_unseen_and_running():
    stopped = ProcessView(10.0, ((0.5, "stopped", 4.0),))
    assert judge_scheduler(stopped, 10.0, 120.0) == "timeout"
    assert judge_scheduler(ProcessView(9.9, stopped.samples), 10.0, 120.0) is None
    assert judge_scheduler(ProcessView(10.0), 10.0, 120.0) == "timeout"  # another host
    assert judge_scheduler(ProcessView(10.0, ((0.5, "zombie", None),)), 10.0, 120.0) == "timeout"
    running = ((2.0, "running", 4.0), (0.5, "sleeping", 4.2))
    assert judge_scheduler(ProcessView(119.0, running), 10.0, 120.0) is None  # loaded
    assert judge_scheduler(ProcessView(120.0, running), 10.0, 120.0) == "stall"
    assert judge_scheduler(ProcessView(20.0, running), 20.0, 5.0) == "stall"  # at least timeout
