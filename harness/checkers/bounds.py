"""Every bound the cases and checkers use, in one place (as Kueue's test/util/constants.go keeps its
timeouts). Seconds unless said otherwise.
"""

#: A Workload that preempts another must get quota within this long once every fault is lifted. Without
#: faults Kueue admits the preemptor within about a second of the victim's quota release (docs/benchmarks.md
#: "Headline figures").
LIVENESS_BOUND = 15.0
#: Bound for each forced step: Kueue reacting to a create or to a release.
STEP = 30.0
#: After the late admission is answered, how long the quota case keeps watching for a violation: Kueue
#: reacts to the re-admission (cache update, unsuspend) within about a second.
SETTLE = 5.0
#: How long an oversubscription must last, with both Jobs unsuspended, to be called lasting.
PERSIST = 3.0
#: "Preemption already issued, waiting for observation" lines for one preemptor/target pair above which
#: the log is called a flood (a stuck preemption retries every ~10 ms: ~1500 lines in 15 s).
FLOOD_LINES = 100
#: Such lines, all after the last fault was lifted and after the target's last watch delivery, that make
#: a stuck preemption conclusive before LIVENESS_BOUND (Kueue's scheduler retries every ~10 ms).
STUCK_LINES = 20
#: Evictions (or preemptions) of one Workload within a case above which it is called thrashing: a
#: Workload preempted, re-admitted and preempted again more often than this never makes progress
#: (kubernetes-sigs/kueue#13662, fair-sharing preemption cycles).
MAX_EVICTIONS = 3
#: An object whose deletion started (metadata.deletionTimestamp) must be gone within this long: Kueue
#: removes its own finalizers (kueue.x-k8s.io/resource-in-use, …) within a reconcile once nothing uses the
#: object; a ClusterQueue stuck Terminating is kubernetes-sigs/kueue#10759.
DELETION_BOUND = 10.0
#: An inactive Workload's new quota reservation is "in flight" (a scheduling cycle that began before the
#: deactivation) only when the admission write was sent before the deactivation was seen; without the
#: proxy's record of that write, a reservation seen within this long after the deactivation cannot be told
#: apart from one in flight (inconclusive), later it is a violation.
INACTIVE_GRACE = 1.0
#: An inactive Workload that got no new quota reservation for this long after its deactivation is judged
#: conclusively (inactive_never_scheduled.decided): an affected Kueue retries it in every scheduling cycle
#: after the requeue (kubernetes-sigs/kueue#10901: within milliseconds), so a reservation would have come.
INACTIVE_SETTLE = 3.0
#: A Workload that fits in its ClusterQueue's free nominal quota gets quota within this long once it exists:
#: Kueue admits it in one of its next scheduling cycles (well under a second here). kubernetes-sigs/kueue#14863:
#: a sticky preemptor whose preemption keeps failing stays in front of such a Workload for ever.
FITS_BOUND = 5.0
#: The pace of a run on an idle machine (harness/checkers/progress.py `pace`): each figure's median in seconds,
#: with room (measured idle, docs/checkers.md "Progress and pace"). A run's pace factor is its largest ratio to these.
NORMAL_PACE = {"api": 0.1, "watch": 0.05, "schedule": 0.2, "pod_stop": 1.0}
#: A run whose pace factor is above this is far slower than normal: a verdict that rests on elapsed time alone
#: is then `error` ("too slow to judge"), never `reproduced`.
SLOW_FACTOR = 4.0
#: Scheduling cycles Kueue must run about the case, while nothing moves for longer than a bound, for the stall
#: to be a loop (evidence) rather than time: a stuck preemption retries every ~10-100 ms (docs/kueue-notes.md
#: §12: p tried 86-90 times in 5 s while s never was).
STALL_CYCLES = 10
#: The longest a stall is waited for, whatever the run's pace: a bound counted in a very slow run's pace (bound ×
#: pace factor) is cut to this, so a case observes at most about this long before its checkers decide.
GIVE_UP = 90.0
#: Seconds (counted in the run's pace) in which nothing of the case moved — no event of any source about it, the
#: proxy holding nothing — after which a case observing only checkers that decide on a violation alone (`quota`,
#: `write_count` with a `min` only: `settles_when_quiet`) stops: Kueue reacts to a change within a scheduling cycle
#: (well under a second idle). Checkers of counts spaced by Kueue's backoffs (1, 2, 4 s…: log_count, bounded
#: evictions, write_count with a `max`) never settle so.
QUIET = 2.0
