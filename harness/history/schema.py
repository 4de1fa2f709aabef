"""The schema of history.jsonl, in one place: every (source, event) a history may hold, the fields it always
carries, and the words of docs/history.md, generated from this module (`python -m harness.history.schema
--write`; tests/unit/test_history_schema.py fails when the two differ).

A new event = one `Row` in `PAGE` (its `required` fields and its words: harness/history/page.py), then `--write`.
`HISTORY_FIELDS` ((source, event) -> required fields) and `history_problems` (where a history departs from it)
are derived here; `kueue-harness report` runs `history_problems` on every bundle it reads.

May import: harness.history.page (the writers of events are record.py, the monitor, the proxy's addon).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.history.page import Row, Table, Text, problems, render, required_fields

#: Where the generated page goes, from the repository's top.
DOC = Path("docs/history.md")


#: The page, in order: prose and tables (docs/history.md is rendered from it).
PAGE: list[Text | Table] = [
    Text("""\
# history.jsonl — the events of one case

Every case run writes `artifacts/<run>/cases/<case>/history.jsonl`: one JSON object per line, sorted by
time. It is what the checkers read (`kueue-harness report` re-runs them on it offline) and what the
sequence diagram in `report.md` is drawn from. Written by `harness/history/record.py` at the end of the case:
the harness's own steps (also flushed as they happen to `harness-events.jsonl`), merged with the proxy's
events for the case's Workloads and Kueue's log milestones about them.

This page is generated from `harness/history/schema.py` (`python -m harness.history.schema --write`; a unit
test fails when they differ): each row there also lists the fields its events always carry (`HISTORY_FIELDS`),
and `history_problems()` reports where a history departs from them (`kueue-harness report` says so for every
bundle it reads; the unit tests run it on real histories).

## Every event
"""),
    Table('| field | type | meaning |', [
        Row('`ts`',
            fields='float',
            meaning=('when, epoch seconds (the clock of the process that recorded it; all on one '
                     'machine for the local target)')),
        Row('`source`',
            fields='string',
            meaning=('who recorded it: `harness` (the case and the pytest plugin), `monitor` (the '
                     "invariant monitor's own watches, direct to kube-apiserver), `proxy` (the "
                     "mitmproxy addon between Kueue and kube-apiserver), `kueue` (a line of Kueue's "
                     'log)')),
        Row('`event`',
            fields='string',
            meaning='what happened; the other fields depend on it (below)'),
    ]),
    Text("""\

Times of different sources are comparable: they come from the same clock. Within one millisecond the
order between sources is not meaningful (the harness records a step after its HTTP call returns; the
proxy records when its hook runs).

## source `harness`
"""),
    Table('| event | fields | meaning |', [
        Row('`case_started`',
            fields=('`case` (pytest node id), `namespace`, `kueue` (its start count and whether it is alive), '
                    '`checkers` (the case\'s checkers and their parameters), optional `kueue_race` (true when the '
                    'Kueue binary under test was built with Go\'s race detector, read from its build information: '
                    '`no_data_race` judges only then)'),
            meaning="the case's own namespace exists; t = 0 of the report's diagram",
            required=('case', 'namespace')),
        Row('`queues_created`',
            fields='`cluster_queue`, `local_queue` ("ns/name"), `nominal_cpu` (quantity string)',
            meaning=('ResourceFlavor, ClusterQueue, LocalQueue and the two WorkloadPriorityClasses '
                     'exist, the ClusterQueue is Active'),
            required=('cluster_queue', 'local_queue', 'nominal_cpu')),
        Row('`cohort_queues_created`',
            fields=('`cluster_queues` (names), `cohort`, `local_queues` ("ns/name"), `quotas` ({name '
                    'the case gave: {resource: nominal quota}})'),
            meaning=("`scenarios.cohort_queues`: ResourceFlavor, the cohort's ClusterQueues, a "
                     'LocalQueue each and the priority classes exist, every ClusterQueue is Active'),
            required=('cluster_queues', 'cohort', 'local_queues', 'quotas')),
        Row('`plan_loaded`',
            fields=('`plan`, `rules` (ids); `steps_moved` ({step id: triggers}) and `file` (the moved '
                    "plan, `plans-moved/<name>.yaml` in the case's folder) when a perturbation's "
                    '`steps_after` moved steps of it; `steps_changed` ({step id: how it deletes}) when'
                    ' its `deletes_as` changed delete steps'),
            meaning='a fault plan (cases/<bug>/plans/*.yaml) was loaded into the proxy',
            required=('plan', 'rules')),
        Row('`plan_step`',
            fields='`rule`, `why`, optional `label`',
            meaning="a plan's hold ended the way the case needs (its release triggers)",
            required=('rule', 'why')),
        Row('`job_created`',
            fields=('`job` ("ns/name"), `priority` (WorkloadPriorityClass), `cpu`, `queue` (its '
                    'LocalQueue), `requests` (other requests of its Pod, e.g. {"memory": "10Gi"}; only'
                    ' when given)'),
            meaning='a batch/v1 Job was created',
            required=('job', 'priority', 'cpu')),
        Row('`held` / `released`',
            fields='`hold` ("h3"), `label`',
            meaning="older cases: the harness saw / released a hold (the proxy's own events carry the detail)",
            required=('hold', 'label')),
        Row('`admission_answered`',
            fields='`status` (HTTP), `resource_version`',
            meaning='the held admission PATCH got its answer',
            required=('status', 'resource_version')),
        Row('`watch_delivered`',
            fields='`resource_version`',
            meaning="Kueue's watch delivered the Workload at that resourceVersion, which the case waited for",
            required=('resource_version',)),
        Row('`observed`',
            fields='`what`, optional `flow`',
            meaning='a step the case waited for, in words',
            required=('what',)),
        Row('`judging`',
            fields='—',
            meaning=('the harness judges the case now: recorded right before the objects judged are '
                     'read, so the judged window ends at the verdict (`observed_until`), not at the '
                     'last event of a quiet source (a pending Workload observed 16 s is judged on 16 '
                     's)'),
            required=()),
        Row('`verdict`',
            fields=('`invariant` ("liveness" \\| "quota" \\| several, comma-separated), `held` (bool), '
                    '`verdict`, `reason`, `kueue` (start count, alive), `seen` (source → epoch seconds'
                    ' of the last event of that source the live checkers had), `pace` (how fast this '
                    "run's control plane moved, as the checkers counted it: `figures` {name: median "
                    'seconds} of `api`, `watch`, `schedule`, `pod_stop`, `samples`, `factor` (× an '
                    'idle run\'s), `slow`; harness/checkers/progress.py, docs/checkers.md "Progress and'
                    ' pace"), more by case; a manual session\'s bundle adds `session` (its name)'),
            meaning=("the case's own conclusion. The checkers judge only the events up to `seen` of "
                     'their source (and the verdict itself): what the live verdict saw, so the offline'
                     ' re-check gives the same findings and counts (`harness/checkers/base.py` '
                     '`within_case`, `observed_until`)'),
            required=('invariant', 'held')),
        Row('`holds_released_at_end`',
            fields='`holds` (ids)',
            meaning='holds still parked at the end of the case, released by the plugin',
            required=('holds',)),
        Row('`kueue_restart`',
            fields=("`kill` (bool: SIGKILL, else SIGTERM), optional `rule` (the plan's `restart_kueue`"
                    ' rule that fired it)'),
            meaning=("the case restarted Kueue — itself (`case.restart_kueue`) or through a plan's "
                     'process fault (harness/nemesis/runner.py); a restart the case asked for, so it '
                     'does not void the verdict'),
            required=('kill',)),
        Row('`nodes_created`',
            fields=('`nodes` (Node names), `labels` and `capacity` (per Node), `kube_scheduler`, '
                    '`kwok` (versions)'),
            meaning=('Pods that run (`@pytest.mark.pods`, `case.add_nodes`): kube-scheduler and kwok '
                     "run, and these kwok Nodes are Ready and schedulable (docs/pods.md); the marker's"
                     ' come before `case_started`'),
            required=('nodes', 'labels', 'capacity', 'kube_scheduler', 'kwok')),
        Row('`pods_finished`',
            fields='`job` ("ns/name"), `phase` (`Succeeded` \\| `Failed`), `pods` (names)',
            meaning="the case asked kwok to finish the Job's Pods (`case.finish_pods`)",
            required=('job', 'phase', 'pods')),
        Row('`case_nodes_deleted`',
            fields='`nodes`, `pods_left` (Pods of the namespace still there after 10 s)',
            meaning="teardown: the case's Nodes were deleted once its Pods were gone",
            required=('nodes', 'pods_left')),
        Row('`real_nodes_tainted`, `real_nodes_untainted`',
            fields='`nodes` (the real Nodes changed), `taint` (tainted only)',
            meaning=('a cluster target (kind, kubeconfig) with Pods that run: its real Nodes carry '
                     "`kueue-harness.x-k8s.io/case-pods-on-kwok=true:NoSchedule` from the case's first"
                     " Node to its teardown, so the case's Pods go to its kwok Nodes (docs/pods.md)"),
            required={'real_nodes_tainted': ('nodes', 'taint'), 'real_nodes_untainted': ('nodes',)}),
        Row('`case_finished`',
            fields='—',
            meaning="the case's teardown began",
            required=()),
        Row('`case_objects_deleted`',
            fields=('`namespace`, optional `finalizers_removed` ("Kind/name" of cluster-scoped case '
                    "objects that were already Terminating, e.g. kueue#10759's wedged ClusterQueue, "
                    'whose finalizers teardown removed)'),
            meaning=("teardown deleted the case's namespace and its cluster-scoped Kueue objects "
                     '(ClusterQueues, ResourceFlavors, WorkloadPriorityClasses, Cohorts named with the'
                     " case's prefix)"),
            required=('namespace',)),
        Row('`case_objects_not_deleted`',
            fields=('`error` (every failure, `; `-joined), `not_deleted` (one line per object teardown'
                    ' could not delete: "Kind/name: status reason")'),
            meaning=('teardown could not delete these; it deleted everything else (a 404 is success, '
                     "one failure skips nothing); summary.json lists them as the case's `not_deleted` "
                     'and `kueue-harness run` prints them'),
            required=('error',)),
        Row('`teardown_problem`',
            fields="`problem` (what went wrong, with Kueue's last log lines when it exited)",
            meaning=('after the verdict, teardown found something that voids it (Kueue exited without '
                     'the case asking for it): the `teardown_clean` assumption makes the verdict '
                     '`error`'),
            required=('problem',)),
        Row('`oversubscription_lasted`',
            fields=('`persisted` (bool), when true also `seconds` (how long it was watched) and `job1`'
                    ' (its conditions)'),
            meaning=('`test_quota_oversubscription`: whether the quota violation it forced outlasted '
                     'the window it watches (cases/kueue_11480)'),
            required=('persisted',)),
        Row('`perturbed_run`',
            fields=('`run` (explore\'s run id, "" under `pytest --plan`), `plan` (its name), `file`, '
                    '`moves` (the plan in words)'),
            meaning=('the case runs under a plan given from outside (`pytest --plan FILE`, '
                     '`kueue-harness explore`: harness/explore/plugin.py); it is judged with '
                     '`plan_happened`, `liveness`, `quota` and `log_flood` besides its own checkers'),
            required=('run', 'plan', 'file', 'moves')),
        Row('`steps_after_asked`',
            fields='`steps` (ids)',
            meaning=("the plan of a perturbed run moves these steps of the case's own plan "
                     '(`steps_after`, docs/fault-plans.md "Moving a case\'s steps"); `plan_happened` '
                     'says `error` for one no loaded plan had'),
            required=('steps',)),
        Row('`deletes_as_asked`',
            fields='`steps` (ids)',
            meaning=("the plan of a perturbed run changes how these delete steps of the case's own "
                     'plan delete (`deletes_as`, docs/fault-plans.md "Moving a case\'s steps"); '
                     '`plan_happened` says `error` for one that was no delete step of a loaded plan'),
            required=('steps',)),
        Row('`step_skipped`',
            fields='`what` (the step\'s wait), `why` ("plan holds a request" \\| "timeout"), `after` (seconds)',
            meaning=('in a perturbed run, a step of the case ended without its condition: the plan '
                     'held a request (Kueue acted; the plan delays the effect), or 8 s passed; the '
                     'case went on'),
            required=('what', 'why', 'after')),
        Row('`settle_problem`',
            fields='`problem`',
            meaning="a perturbed run's plan still held a flow after its timeouts when the run was judged",
            required=('problem',)),
        Row('`explore_result_not_written`',
            fields='`error`',
            meaning="a perturbed run's `explore.json` could not be written (the verdict stands)",
            required=('error',)),
        Row('`kueue_configured`',
            fields=('`why` ("case": the case\'s `kueue_config` marker, before `case_started`; "plan '
                    'NAME": a plan\'s `kueue:` section), `declared` (the declaration in Kueue\'s '
                    'spellings, {} for the default), `summary`, `restarted` (bool: Kueue was restarted'
                    " because its Configuration file differed), `seconds` (that restart, until Kueue's"
                    ' webhooks answered; 0 without one), `feature_gates` (what Kueue reported in its '
                    '"Loaded feature gates" line), `if_known` (only when the declaration has '
                    '"if-known" gates: each one → whether it was given, on, to this build), `fresh` '
                    '(only on a race build: restarted although unchanged, so its race detector sees the case anew)'),
            meaning=("the case's Kueue configuration is in force (docs/kueue-config.md). A restart "
                     "before `case_started` is already in its start count; one after it (a plan's "
                     'section) is counted as asked for by `kueue_not_restarted_unasked`'),
            required=('why', 'declared', 'summary', 'restarted', 'seconds', 'feature_gates')),
    ], source='harness'),
    Text("""\

## source `monitor`

The invariant monitor (`harness/checkers/monitor.py`) watches Workloads and ClusterQueues directly and re-runs
the quota checker on every event.
"""),
    Table('| event | fields | meaning |', [
        Row('`quota_violation_started`',
            fields=('`finding` (one line), `used_milli`, `allowed_milli` (milli-units), `workloads` '
                    '("ns/name" list)'),
            meaning='a ClusterQueue (or cohort) holds more than its quota from now',
            required=('finding', 'used_milli', 'allowed_milli', 'workloads')),
        Row('`quota_violation_cleared`',
            fields='`finding`',
            meaning='… no longer',
            required=('finding',)),
        Row('`reservation_mismatch_started` / `_cleared`',
            fields='`mismatch` (one line)',
            meaning=('ClusterQueue `status.flavorsReservation` disagrees with its Workloads (Kueue '
                     'writes it asynchronously: short mismatches are normal)'),
            required=('mismatch',)),
        Row('`k8s_event`',
            fields=('`reason`, `type` (Normal \\| Warning), `message` (first 500 characters), `count`, '
                    '`regarding` ("Kind/name" of the object it is about), `reporter` (the component)'),
            meaning=("with lifecycle facts: a Kubernetes Event of the case's namespace, new or "
                     'repeated (its count grew) — what Kueue or any controller reported about the '
                     "case's objects, from the API, whatever Kueue's log format (kueue PR #13785: "
                     'v0.17 writes no "Event occurred" log line)'),
            required=('reason', 'type', 'message', 'count', 'regarding', 'reporter')),
        Row('`watch_error`',
            fields='`error` (what the watch or its re-check raised, one line)',
            meaning=("one of the monitor's watches failed; it is opened again. The default assumption "
                     "that the monitor's watches were healthy judges these (a verdict resting on a "
                     'broken watch is `error`)'),
            required=('error',)),
    ], source='monitor'),
    Text("""\

With lifecycle facts (the plugin runs the monitor so for every case whose checkers need them:
`bounded_evictions`, `deletion_completes`, `running_pods_within_quota`, `inactive_never_scheduled`,
`pending_fits_admitted`, `pending_accounting`, `liveness` with `workloads=`), it also watches LocalQueues, Cohorts and the case namespace's Pods and
records, for the case's objects (its namespace; ClusterQueues and Cohorts named with its prefix), what
changed between two versions its watch delivered (`harness/checkers/model/lifecycle.py`). Every such event has
`resource_version`, the version it was read from; `key` is "ns/name" (cluster-scoped: "name"). Its time is
when the monitor's watch delivered the version, a few milliseconds after kube-apiserver stored it.
"""),
    Table('| event | fields | meaning |', [
        Row('`object_deleting`',
            fields=('`kind` (ClusterQueue, LocalQueue, Cohort, Workload, Pod), `key`, `finalizers` '
                    '(left on it), `deletion_timestamp`'),
            meaning='its deletion started: the first version with `metadata.deletionTimestamp`',
            required=('kind', 'key', 'finalizers', 'deletion_timestamp', 'resource_version')),
        Row('`object_deleted`',
            fields=('`kind`, `key`, `finalizers` (of its last version); `read: true` when a read found'
                    ' it gone (then `finalizers` is empty and `resource_version` null)'),
            meaning="it is gone (the watch's DELETED, or the monitor's read below; recorded once)",
            required=('kind', 'key', 'finalizers', 'resource_version')),
        Row('`object_still_deleting`',
            fields='`kind`, `key`, `finalizers` (still on it), `seconds` (since its `object_deleting`)',
            meaning=('every second while its deletion is pending, the monitor reads it directly and '
                     'finds it still there (`InvariantMonitor.check_deleting`, '
                     '`STILL_DELETING_EVERY`): a stuck deletion is quiet, no watch event comes, and '
                     '`deletion_completes` must tell "still there" from "nothing heard"'),
            required=('kind', 'key', 'finalizers', 'seconds', 'resource_version')),
        Row('`workload_seen`',
            fields='`key`, `queue` (spec.queueName), `active`, `priority`',
            meaning='the monitor saw the Workload for the first time',
            required=('key', 'queue', 'active', 'priority', 'resource_version')),
        Row('`workload_active_changed`',
            fields='`key`, `active` (bool)',
            meaning='`spec.active` changed (or was false when first seen)',
            required=('key', 'active', 'resource_version')),
        Row('`workload_quota_reserved`',
            fields='`key`, `cluster_queue`, `active` (spec.active of that version)',
            meaning='`QuotaReserved` turned True',
            required=('key', 'cluster_queue', 'active', 'resource_version')),
        Row('`workload_quota_released`',
            fields='`key`, `reason` (of QuotaReserved=False, or null when the condition went)',
            meaning='`QuotaReserved` turned False',
            required=('key', 'reason', 'resource_version')),
        Row('`workload_evicted`',
            fields=('`key`, `reason` (of Evicted: Preempted, Deactivated, …), `message` (first 200 '
                    'characters), `count` (the n-th eviction the monitor saw), `evictions_total` '
                    "(Kueue's own `status.schedulingStats.evictions` count summed, null when absent)"),
            meaning=('`Evicted` turned True; an admission resets it to False '
                     '(pkg/workload/workload.go:849-875), so each eviction is one event'),
            required=('key', 'reason', 'count', 'evictions_total', 'resource_version')),
        Row('`accounting_mismatch_started` / `_cleared`',
            fields=('`kind` (ClusterQueue \\| LocalQueue), `name` ("ns/name" for a LocalQueue), `field`'
                    ' (`pendingWorkloads`, `reservingWorkloads`, `admittedWorkloads`), `finding` (one '
                    'line); started also `status` (what the status says), `counted` (what its '
                    'Workloads make), `workloads` ("ns/name" counted)'),
            meaning=("a case ClusterQueue's or LocalQueue's Workload count disagrees with its "
                     'Workloads, from now / no longer (`harness/checkers/model/accounting.py`; judged '
                     'by `pending_accounting`)'),
            required={'accounting_mismatch_started': ('kind', 'name', 'field', 'status', 'counted', 'workloads', 'finding'), 'accounting_mismatch_cleared': ('kind', 'name', 'field', 'finding')}),
        Row('`pods_over_quota_started` / `_cleared`',
            fields=('`finding` (one line), `cluster_queue`, `resource`; started also `running_milli`, '
                    '`held_milli` (milli-units), `pods` ("ns/name")'),
            meaning=('the running Pods of a ClusterQueue request more than its admitted Workloads '
                     'hold, from now / no longer (`lifecycle.pods_over_quota`)'),
            required={'pods_over_quota_started': ('finding', 'cluster_queue', 'resource', 'running_milli', 'held_milli', 'pods'), 'pods_over_quota_cleared': ('finding', 'cluster_queue', 'resource')}),
    ], source='monitor'),
    Text("""\

## source `proxy`

Copied from `env/proxy-events.jsonl` (the addon's own record, flushed per event): events about the
case's Workloads (those of its namespace, also the ones a plan's steps or Kueue created), the `request` and
`response` of Kueue's writes to the Jobs of the case's namespace (a Job suspended or resumed is a progress step:
docs/checkers.md "Progress and pace"), and every hold/release/fault/step/fact event and rule loaded since the case
started.
`flow` numbers the proxy's flows in the session (the same number is `kh_flow` in the metadata of
`flows.mitm`).
"""),
    Table('| event | fields | meaning |', [
        Row('`rule_added`',
            fields=('`rule` (the rule as `harness/plan/rules.py` `Rule.to_dict()` writes it: `id`, '
                    '`match`, `action`, `stage`, `times`, `release`, …), `load` (1, 2, …: one number '
                    'per load, the same for every rule of one plan load, so a plan loaded again after '
                    '`plan clear` with the same ids is another load; '
                    '`signalled`/`signal_done`/`rule_removed` belong to the last load of their id '
                    'before them: `harness/checkers/base.py` `rule_loads`; missing in histories from '
                    'before it), optional `plan`, and with it optional `plan_source` ({`file`: the '
                    "plan file's absolute path, `namespace`: the one `plan load --namespace` gave, "
                    '`by`: "up --plan" or "plan load"}; a session bundle\'s "run it again" line is made'
                    ' from it)'),
            meaning='a fault rule was loaded',
            required=('rule',)),
        Row('`rule_removed`',
            fields='`rule` (its id)',
            meaning=("a rule was unloaded (`plan clear`, `DELETE /rules/ID`, a case's teardown after "
                     'its verdict); a step removed before it was signalled was withdrawn, not failed '
                     '(`steps_done`)'),
            required=('rule',)),
        Row('`request`',
            fields='`flow`, `method`, `path`, `user_agent`, `write` (below)',
            meaning='Kueue sent a write the addon classified',
            required=('flow', 'method', 'path', 'write')),
        Row('`held`',
            fields=('`flow`, `hold`, `rule`, `stage` ("request" \\| "response"), `label`; at the '
                    'response stage also `status`, `resource_version` of the parked answer'),
            meaning=('a rule parked the request (kube-apiserver has not seen it) or the answer '
                     '(kube-apiserver applied it; Kueue has not heard)'),
            required=('flow', 'hold', 'rule', 'stage', 'label')),
        Row('`released`',
            fields=('`flow`, `hold`, `rule`, `stage`, `label`, `why` ("triggers: …" for a plan\'s '
                    'triggers, "max_hold …", or the reason given over the control channel: '
                    '"kueue-harness release" / "kueue-harness release --all" from the CLI, "test" from'
                    ' a case\'s `proxy.release(h)` unless it gives its own, "end of case" when the '
                    'plugin releases what is left)'),
            meaning='the parked flow went on',
            required=('flow', 'hold', 'rule', 'stage', 'label', 'why')),
        Row('`flow_error`',
            fields=("`flow` (null for a watch the proxy had not numbered), `error` (mitmproxy's error:"
                    ' the connection reset, the client gone)'),
            meaning=('a classified write or a watch ended in a transport error; an error the plan did '
                     'not ask for voids the verdict (`no_unexplained_proxy_failure`)'),
            required=('flow', 'error')),
        Row('`failed`',
            fields=('`flow`, `rule`, `stage`, `status`, `label`, optional `hold` and `why` (a failed '
                    'hold: "triggers: …" for `then: fail`, "release.timeout Ns", or the control '
                    'channel\'s reason: "kueue-harness fail" from the CLI, "test" from a case\'s '
                    '`proxy.fail(h)`), optional `after` (a `fail` rule with `delay`: the seconds it '
                    'waited before answering)'),
            meaning='the proxy answered with an injected Kubernetes `Status`',
            required=('flow', 'rule', 'stage', 'status', 'label')),
        Row('`hold_expired`',
            fields=('`flow`, `hold`, `rule`, `label`, `max_hold` (seconds), `since` (epoch seconds the'
                    ' hold began)'),
            meaning=("a hold reached its rule's `max_hold` and was released (the case's verdict "
                     "becomes `error`; a session's log says so)"),
            required=('flow', 'hold', 'rule', 'label')),
        Row('`hold_timeout`',
            fields='`flow`, `hold`, `rule`, `label`, `then`',
            meaning="a plan's `release.timeout` ended the hold as the plan says",
            required=('flow', 'hold', 'rule', 'label', 'then')),
        Row('`delayed`',
            fields='`flow`, `rule`, `stage`, `seconds`, `label`',
            meaning='a delay rule slowed the flow',
            required=('flow', 'rule', 'stage', 'seconds', 'label')),
        Row('`reset`',
            fields='`flow`, `rule`, `stage`, `label`',
            meaning='the stream was reset instead of answered',
            required=('flow', 'rule', 'stage', 'label')),
        Row('`response`',
            fields=("`flow`, `status`, `resource_version` (from the answer's metadata, null if none), "
                    '`label`, `write` (the class), `namespace`, `name`'),
            meaning='Kueue received the answer to a classified write',
            required=('flow', 'status', 'resource_version', 'label', 'write', 'namespace', 'name')),
        Row('`watch_event`',
            fields=('`flow` (the watch), `type` (ADDED \\| MODIFIED \\| DELETED), `namespace`, `name`, '
                    '`resource_version`, `conditions` (type → "True"/"False"), `admission` (bool: '
                    'status.admission set); for a line that waited: `delayed` (seconds it waited in '
                    'the proxy), and for the line a `delay_watch_events` rule held also `delay_rule` '
                    'and `late` (seconds after its due time; negative: the watch ended first)'),
            meaning="Kueue's Workload watch delivered this object version",
            required=('flow', 'type', 'namespace', 'name', 'resource_version', 'conditions', 'admission')),
        Row('`watch_event_dropped`',
            fields='as `watch_event` + `rule`',
            meaning='a rule kept that event from Kueue',
            required=('flow', 'rule', 'type', 'namespace', 'name', 'resource_version')),
        Row('`watch_event_delayed`',
            fields='as `watch_event` + `rule`, `seconds`, `due` (epoch seconds)',
            meaning=('a `delay_watch_events` rule held the event (and, behind it, the rest of that '
                     'watch stream); its `watch_event` follows when it goes out'),
            required=('flow', 'rule', 'seconds', 'due', 'type', 'namespace', 'name', 'resource_version')),
        Row('`watch_events_undelivered`',
            fields='`flow`, `lines`',
            meaning=('the watch ended in an error (Kueue cancelled it, or exited) with that many held '
                     'lines never delivered'),
            required=('flow', 'lines')),
        Row('`signalled`',
            fields=('`rule`, `action` (`restart_kueue`, or a step: `create`, `patch`, `delete`, '
                    '`wait`), `why` ("loaded", "triggers: …", "release.timeout Ns"), the action\'s keys'
                    " (`kill`; a step's `create` (the objects), `patch`, `delete`, `wait` and "
                    '`timeout`)'),
            meaning="a process fault's or plan step's triggers held; the harness now performs it",
            required=('rule', 'action', 'why')),
        Row('`signal_done`',
            fields=('`rule`, `action`, `ok`, `since_signalled` (seconds), `seconds` (the restart, '
                    "until Kueue's webhooks answered; a step's calls or wait), `kill` (restart), "
                    '`objects` (a create/patch/delete step: `Workload team-a/w1 rv 123` per object), '
                    "`matched` (a wait step: what it saw, as in `fact`'s `detail`), or `error`"),
            meaning=('the harness finished it; `{rule: ID, state: released}` triggers hold from now '
                     'on, and `{step: ID}` triggers when `ok`'),
            required=('rule', 'action', 'ok', 'since_signalled')),
        Row('`fact`',
            fields=('`fact` (the fact\'s key: canonical JSON of the trigger, e.g. `{"log": "…"}`, '
                    '`{"condition": "Admitted", "namespace": "…", "object": "Workload/w1", "status": '
                    '"True"}`), `what` ("Kueue logged /…/", "Workload/w1 Admitted=True", "Workload/w1 '
                    'deleted"), `rules` (the rules and steps waiting for it), `detail` (a log fact: '
                    "`line`, the searched text, and `log_ts`, the line's time; an object fact: "
                    '`object`, the object it saw (`Workload team-a/job-a-cc5b7`: with a name glob, the'
                    ' one that matched), `observed`, what of it matched and at which resourceVersion '
                    '(`QuotaReserved=True(QuotaReserved) at rv 128`, `$.spec.suspend = false at rv '
                    '130`, `deleted (DELETED)`; prefixed with the object for a glob), '
                    '`resource_version`; both: `seen_ts`, when the harness saw it)'),
            meaning=('the harness (harness/nemesis/runner.py) saw a `{log: …}` / `{object: …}` fact '
                     'happen that a loaded trigger or `wait` step names, and told the proxy, which '
                     're-evaluated its triggers (once per fact)'),
            required=('fact', 'what', 'rules', 'detail')),
        Row('`fact_problem`',
            fields=('`fact`, `what`, `rules` (as in `fact`), `problem` (why it can never hold: '
                    '"Workload/job-a-* matched 2 Workloads in namespace team-a when job-a-b-49883 had '
                    'QuotaReserved=True(QuotaReserved) at rv 145 (job-a-b-49883, job-a-cc5b7): …")'),
            meaning=('the harness found that an `{object: …}` trigger whose name is a glob matched '
                     'several objects when it mattered (docs/fault-plans.md, "Object names and '
                     'globs"): the fact never holds, so what waits for it waits until its timeout; '
                     'once per fact'),
            required=('fact', 'what', 'rules', 'problem')),
    ], source='proxy'),
    Text("""\

Only in `env/proxy-events.jsonl` (never copied into a case's history): `rule_unmatched` — `rule`, `label`
(the write that came by), `seen` and `want` ({match key: the value Kueue wrote / the rule's value}),
`hint` — once per loaded rule without hits, when a write came by that the rule names wrongly (`name:
job1` for the Workload `job-job1-62dce`, a field manager that is part of the real one). A manual
session's log prints it as a warning (docs/fault-plans.md, "When a rule matches nothing").

`write` of a `request` (`harness/kueue/api.py` `KueueWrite`): `kind`, `namespace`, `name`, `write`
(for Workload status writes one of `admission`, `eviction`, `quota_release`, `pending`, `finish`,
`other`; else the HTTP verb), `method`, `subresource`, `field_manager` (e.g. `kueue-admission`),
`patch_type` (`apply`, `merge`, …), `strict` (the body carries `metadata.resourceVersion`),
`resource_version`, `conditions` (type → [status, reason] as sent), `admission_cluster_queue`, `suspend` (a Job
write: `spec.suspend` as sent, else null; explore tells Job suspend from unsuspend by it).

## source `kueue`
"""),
    Table('| event | fields | meaning |', [
        Row('`log`',
            fields=('`msg`, `fields` (the rest of the zap JSON line except `ts`, `msg`, `caller`: '
                    '`level`, `logger`, `workload`, `targetWorkload`, `preemptingWorkload`, '
                    '`clusterQueue`, …; Workloads as `{"name", "namespace"}`)'),
            meaning=("a line of Kueue's log about one of the case's Workloads or any other object of "
                     "the case's namespace (a Job, a Pod, a ProvisioningRequest, a LocalQueue: a KObj "
                     "value or controller-runtime's top-level `namespace`) whose message is a "
                     'milestone (`harness/kueue/log.py` `MILESTONES`): "Preempted", "Preemption '
                     'ongoing", "Preemption already issued, waiting for observation", "Workload '
                     'successfully admitted and assigned flavors", "Attempting to schedule workload" '
                     '(one per Workload a scheduling cycle considers, with its `schedulingCycle`: how '
                     'the checkers count Kueue\'s cycles), "Workload re-queued", "Could not admit '
                     'Workload and assign flavors in apiserver", "Handling a job with evicted '
                     'condition"'),
            required=('msg', 'fields')),
        Row('`log_repeated`',
            fields=('`msg`, `fields` (of the first line it stands for), `count`, `first`, `last` '
                    "(epoch seconds), `offsets_us` (each line's time after `first`, integer "
                    "microseconds), optional `cycles` (each line's `schedulingCycle`, when the lines "
                    "carry one: the checkers count Kueue's scheduling cycles on the expanded history "
                    'as on the full one)'),
            meaning=('the lines after the first 10 of one message about the same Workloads (same '
                     '`workload`, `targetWorkload`, `preemptingWorkload`, `clusterQueue`, `job`), at '
                     'the time of the first of them'),
            required=('msg', 'fields', 'count', 'first', 'last', 'offsets_us')),
        Row('`data_race`',
            fields=('`report` (Go\'s race detector\'s report: "WARNING: DATA RACE", each access with its stack; '
                    'at most 40,000 characters), `accesses` (a line each: "Write at 0x… by goroutine 312: …set()")'),
            meaning=('a Kueue built with `-race` (`--kueue-race`) found two goroutines touching one variable '
                     'unsynchronised; at the time of the log line before the report; every one since the case '
                     'started, whatever it is about (`harness/kueue/log.py` `RaceReader`); judged by `no_data_race`'),
            required=('report', 'accesses')),
    ], source='kueue'),
    Text("""\

A stuck preemption logs "Preemption already issued, waiting for observation" and "Workload re-queued"
about every 10 ms: 15 s of it were 2863 events (1.49 MB) in history.jsonl. The bundle keeps the first 10
lines of each such message and one `log_repeated` event for the rest (`harness/history/repeats.py` `summarize`;
that history is 60 events, 52 KB). `repeats.expand` turns it back into one `log` event per line with the
same times to the microsecond; the checkers (`compose`) and the diagram read the expanded history, so the
conclusive-stuck rule of liveness (it counts the lines after a time) and the log-flood count are the same
as on the full history. kueue.log keeps every line."""),
]


#: (source, event) -> the fields each such event of history.jsonl carries besides ts/source/event.
HISTORY_FIELDS: dict[tuple[str, str], tuple[str, ...]] = required_fields(PAGE)
#: The fields of a proxy `request`'s `write` (harness/kueue/api.py KueueWrite.to_dict).
WRITE_FIELDS = ("kind", "namespace", "name", "write", "method", "subresource", "field_manager", "patch_type",
                "strict", "resource_version", "conditions", "admission_cluster_queue")


def history_problems(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where a history departs from this schema: events out of time order, unknown (source, event) pairs,
    missing fields (harness/history/page.py `problems`). One line per problem, at most one per kind of event."""
    return problems(history, HISTORY_FIELDS, {("proxy", "request"): ("write", WRITE_FIELDS)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.history.schema",
                                 description="Print docs/history.md from the history schema, or write/check it.")
    ap.add_argument("--write", action="store_true", help=f"write {DOC} (run from the repository's top)")
    ap.add_argument("--check", action="store_true", help=f"exit 1 when {DOC} differs from the schema")
    args = ap.parse_args(argv)
    text = render(PAGE)
    if args.write:
        DOC.write_text(text)
        print(f"wrote {DOC} ({len(text.splitlines())} lines, {len(HISTORY_FIELDS)} events)")
    elif args.check:
        ok = DOC.is_file() and DOC.read_text() == text
        print(f"{DOC} {'matches' if ok else 'differs from'} harness/history/schema.py"
              + ("" if ok else ": run `python -m harness.history.schema --write`"))
        return 0 if ok else 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
