"""harness/checkers/field.py on synthetic objects: any field of any object, at the verdict."""

from __future__ import annotations

import pytest

from harness.checkers import REGISTRY, Selection, compose
from harness.checkers.field import FieldInvariant
from harness.history.names import Names

NS = "case-1"


def wl(name, owner=None, admitted=True, message=None):
    meta = {"name": name, "namespace": NS}
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner, "controller": True}]
    st = {"conditions": [{"type": "Admitted", "status": "True" if admitted else "False"}]}
    if message is not None:
        st["admissionChecks"] = [{"name": "prov", "state": "Pending", "message": message}]
    return {"metadata": meta, "status": st}


def judge(c, objs):
    return [(f.result, f.summary) for f in c.check([], objs, Names([], NS))]


def test_a_field_must_or_must_never_hold() -> None:
    """kueue PR #13785: a ProvisioningRequest create conflict persisted as the admission check's message."""
    c = FieldInvariant("Workload", '$.status.admissionChecks[?(@.name=="prov")].message', matches="already exists",
                       never=True)
    assert [r for r, _ in judge(c, {"workloads": [wl("w1", message="waiting")]})] == ["held"]
    conflict = {"workloads": [wl("w1", message='provisioningrequests "w1-prov-1" already exists')]}
    assert [r for r, _ in judge(c, conflict)] == ["violated"]
    assert judge(c, {"workloads": []})[0][0] == "error"  # nothing to judge: never a vacuous pass


def test_at_most_one_admitted_slice_per_job() -> None:
    """kueue PR #11327: two quick scale-ups made two replacement slices for one old slice, both admitted."""
    c = FieldInvariant("Workload", '$.status.conditions[?(@.type=="Admitted")].status', equals="True",
                       per="owner", at_most=1)
    one = {"workloads": [wl("s1", "j"), wl("s2", "j", admitted=False)]}
    two = {"workloads": [wl("s1", "j"), wl("s2", "j"), wl("o1", "other")]}
    assert [r for r, _ in judge(c, one)] == ["held"]
    assert judge(c, two) == [("violated", "Job/j: 2 Workloads with $.status.conditions[?(@.type==\"Admitted\")].status")]
    assert compose(Selection({"field": {"kind": "Workload", "path": "$.status.conditions[*].status",
                                        "equals": "True", "per": "owner", "at_most": 1}}), [], two,
                   Names([], NS)).verdict == "reproduced"


def test_unless_leaves_out_finished_slices() -> None:
    """A replaced slice keeps QuotaReserved=True once Finished (pkg/workload/workload.go Finish only adds the
    condition): `unless` leaves it out, so only active slices are counted."""
    finished = wl("s1", "j")
    finished["status"]["conditions"].append({"type": "Finished", "status": "True"})
    objs = {"workloads": [finished, wl("s2", "j")]}
    kw = dict(per="owner", at_most=1, equals="True", path='$.status.conditions[?(@.type=="Admitted")].status')
    assert judge(FieldInvariant("Workload", **kw), objs)[0][0] == "violated"
    unless = '$.status.conditions[?(@.type=="Finished" && @.status=="True")]'
    assert judge(FieldInvariant("Workload", unless=unless, **kw), objs)[0][0] == "held"
    assert judge(FieldInvariant("Workload", unless=unless, **kw), {"workloads": [finished]})[0][0] == "error"
    with pytest.raises(ValueError, match="unless"):
        FieldInvariant("Workload", unless="$.[", **kw)


@pytest.mark.parametrize("kw, words", [
    ({"kind": "Gadget", "path": "$.x", "equals": 1}, "not one of"),
    ({"kind": "Job", "path": "$.[", "equals": 1}, "not a JSONPath"),
    ({"kind": "Job", "path": "$.x"}, "exactly one of"),
    ({"kind": "Job", "path": "$.x", "equals": 1, "per": "owner"}, "at_most"),
    ({"kind": "Job", "path": "$.x", "matches": "("}, "not a regular expression"),
])
def test_bad_parameters_are_refused_with_what_to_change(kw, words) -> None:
    with pytest.raises(ValueError, match=words):
        FieldInvariant(**kw)
    assert "field" in REGISTRY


def test_a_patch_step_with_each_takes_a_glob_only() -> None:
    """`each: true` (harness/plan/steps.py patch_spec): every object a glob matches; with one name it is refused."""
    from harness.plan.steps import StepError, describe_patch, patch_spec

    spec = patch_spec({"object": "Workload/job-j-*", "each": True, "merge": {"metadata": {"labels": {"x": "1"}}}})
    assert spec["each"] is True and describe_patch(spec).startswith("patch each of Workload/job-j-*")
    with pytest.raises(StepError, match="goes with a glob"):
        patch_spec({"object": "Workload/w1", "each": True, "merge": {}})
    with pytest.raises(StepError, match="each must be true or false"):
        patch_spec({"object": "Workload/w*", "each": "yes", "merge": {}})
