"""Per-case Kueue configuration (harness/kueue/config.py): parsing a declaration, laying it over the
harness's Configuration, the feature-gate table of Kueue's pkg/features/kube_features.go, and which
webhooks follow the integrations. Synthetic inputs only; the real restart is tests/integration/test_kueue_config.py."""

from __future__ import annotations

import pytest

from harness.kueue import config as kc
from harness.kueue.config import KueueConfig, KueueConfigError

BASE = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
    "integrations": {"frameworks": ["batch/job"]}, "featureGates": {"VisibilityOnDemand": False},
}

#: A cut of v0.17.0's table in its own layout (pkg/features/kube_features.go:367-546).
VERSIONED = '''
package features

var defaultVersionedFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	PartialAdmission: {
		{Version: version.MustParse("0.4"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("0.5"), Default: true, PreRelease: featuregate.Beta},
	},
	LendingLimit: {
		{Version: version.MustParse("0.6"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("0.9"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("0.17"), Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 0.19
	},

	ShortWorkloadNames: {
		{Version: version.MustParse("0.17"), Default: false, PreRelease: featuregate.Alpha},
	},
}

func SetFeatureGateDuringTest(tb testing.TB, f featuregate.Feature, value bool) {
}
'''

FLAT = '''
var defaultFeatureGates = map[featuregate.Feature]featuregate.FeatureSpec{
	PartialAdmission:  {Default: true, PreRelease: featuregate.Beta},
	QueueVisibility:   {Default: false, PreRelease: featuregate.Alpha},
}
'''


def test_no_declaration_is_the_harness_config_exactly():
    assert kc.parse(None) is kc.DEFAULT and kc.parse({}).is_default
    assert kc.DEFAULT.apply(BASE) == BASE
    assert kc.DEFAULT.summary() == "the harness's default"


def test_marker_and_yaml_spellings_mean_the_same():
    a = kc.parse({"feature_gates": {"PartialAdmission": False}, "fair_sharing": True, "wait_for_pods_ready": "30s",
                  "integrations": ["pod"]})
    b = kc.parse({"featureGates": {"PartialAdmission": False}, "fairSharing": True, "waitForPodsReady": {"timeout": "30s"},
                  "integrations": ["pod"]})
    assert a == b
    assert a.to_json() == {"featureGates": {"PartialAdmission": False},
                           "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
                           "waitForPodsReady": {"timeout": "30s"}, "integrations": ["pod"]}


def test_apply_merges_gates_extends_frameworks_and_merges_overrides_last():
    cfg = kc.parse({"feature_gates": {"ShortWorkloadNames": True}, "integrations": ["batch/job", "pod"],
                    "overrides": {"clientConnection": {"qps": 50}, "featureGates": {"PartialAdmission": False}}})
    got = cfg.apply(BASE)
    assert got["featureGates"] == {"VisibilityOnDemand": False, "ShortWorkloadNames": True, "PartialAdmission": False}
    assert got["integrations"]["frameworks"] == ["batch/job", "pod"]
    assert got["clientConnection"] == {"qps": 50}
    assert BASE["featureGates"] == {"VisibilityOnDemand": False}  # base untouched


@pytest.mark.parametrize("decl, words", [
    ({"feature_gate": {}}, ["unknown key 'feature_gate'", "feature_gates (featureGates)"]),
    ({"feature_gates": {"PartialAdmission": "yes"}}, ["featureGates.PartialAdmission must be true, false or 'if-known'"]),
    ({"feature_gates": {"partial-admission": True}}, ["is not a feature gate name"]),
    ({"fair_sharing": {"preemptionStrategies": ["Biggest"]}}, ["preemptionStrategies must be a non-empty list"]),
    ({"fair_sharing": "on"}, ["fairSharing must be true, false or a mapping"]),
    ({"wait_for_pods_ready": {"blockAdmission": True}}, ["waitForPodsReady.timeout must be a Go duration"]),
    ({"wait_for_pods_ready": "ten minutes"}, ["waitForPodsReady.timeout must be a Go duration"]),
    ({"integrations": "pod"}, ["integrations must be a list"]),
    ({"integrations": ["kubeflow.org/notajob"]}, ["'kubeflow.org/notajob' is not a Kueue framework"]),
    ({"overrides": {"webhook": {"port": 1}}}, ["overrides.webhook: the harness sets webhook"]),
    ({"feature_gates": {}, "featureGates": {}}, ["given twice"]),
    (["featureGates"], ["expected a mapping"]),
])
def test_bad_declarations_say_what_to_change(decl, words):
    with pytest.raises(KueueConfigError) as e:
        kc.parse(decl, "case x")
    for w in words:
        assert w in str(e.value), str(e.value)
    assert str(e.value).startswith("case x: ")


def test_every_problem_is_reported_at_once():
    with pytest.raises(KueueConfigError) as e:
        kc.parse({"bogus": 1, "integrations": ["nope"], "fair_sharing": 3})
    assert len(e.value.problems) == 3


def test_plan_section_over_case_declaration():
    case = kc.parse({"feature_gates": {"A1": True, "B1": True}, "integrations": ["pod"]})
    plan = kc.parse({"feature_gates": {"B1": False}, "fair_sharing": True})
    both = plan.over(case)
    assert both.feature_gates == {"A1": True, "B1": False}
    assert both.integrations == ("pod",) and both.fair_sharing is not None


def test_load_file_accepts_the_mapping_a_kueue_key_or_a_whole_plan(tmp_path):
    (tmp_path / "a.yaml").write_text("featureGates: {PartialAdmission: false}\n")
    (tmp_path / "b.yaml").write_text("kueue:\n  featureGates: {PartialAdmission: false}\n")
    (tmp_path / "c.yaml").write_text("apiVersion: kueue-harness/v1\nkind: FaultPlan\nkueue:\n"
                                     "  featureGates: {PartialAdmission: false}\nrules: []\n")
    want = KueueConfig(feature_gates={"PartialAdmission": False})
    assert [kc.load_file(tmp_path / n) for n in ("a.yaml", "b.yaml", "c.yaml")] == [want] * 3
    with pytest.raises(KueueConfigError, match="cannot read"):
        kc.load_file(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("featureGates: [\n")
    with pytest.raises(KueueConfigError, match="not valid YAML"):
        kc.load_file(tmp_path / "bad.yaml")


def test_versioned_table_takes_the_newest_spec():
    gates = kc.parse_gates(VERSIONED)
    assert set(gates) == {"PartialAdmission", "LendingLimit", "ShortWorkloadNames"}
    assert gates["PartialAdmission"] == kc.Gate("PartialAdmission", True, "Beta", False, "0.5")
    assert gates["LendingLimit"].locked and gates["LendingLimit"].stage == "GA"
    assert gates["ShortWorkloadNames"].default is False


def test_flat_table_of_older_releases():
    gates = kc.parse_gates(FLAT)
    assert gates["QueueVisibility"] == kc.Gate("QueueVisibility", False, "Alpha", False, "")
    with pytest.raises(ValueError):
        kc.parse_gates("package features\n")


def test_unknown_gate_names_the_versions_that_have_it():
    known = kc.parse_gates(VERSIONED)
    by_tag = {"v0.17.0": known, "v0.18.5": known, "v0.18.6": {**known, "PrioritizePreemptorWorkloads": known["PartialAdmission"]},
              "v0.19.0": known, "v0.19.1": {"PrioritizePreemptorWorkloads": known["PartialAdmission"]},
              "v0.19.2": {"PrioritizePreemptorWorkloads": known["PartialAdmission"]}}
    with pytest.raises(KueueConfigError) as e:
        kc.check_gates({"PrioritizePreemptorWorkloads": True}, known, "v0.17.0", by_tag)
    msg = str(e.value)
    assert "PrioritizePreemptorWorkloads is unknown to Kueue v0.17.0" in msg
    assert "v0.18.6, v0.19.1–v0.19.2" in msg
    with pytest.raises(KueueConfigError, match="did you mean PartialAdmission"):
        kc.check_gates({"Partialadmission": True}, known, "v0.17.0", by_tag)
    with pytest.raises(KueueConfigError, match="no cached Kueue repository"):
        kc.check_gates({"Nope": True}, known, "v0.17.0", {})


def test_locked_gate_against_its_default_is_refused_with_it_is_fine():
    known = kc.parse_gates(VERSIONED)
    with pytest.raises(KueueConfigError, match="LendingLimit is GA and locked to true"):
        kc.check_gates({"LendingLimit": False}, known, "v0.17.0", {})
    kc.check_gates({"LendingLimit": True, "ShortWorkloadNames": True, "AllAlpha": False}, known, "v0.17.0", {})


@pytest.mark.parametrize("path, frameworks, wanted", [
    ("/mutate-kueue-x-k8s-io-v1beta2-workload", [], True),
    ("/validate-batch-v1-job", ["batch/job"], True),
    ("/validate-batch-v1-job", [], False),
    ("/mutate--v1-pod", ["batch/job"], False),
    ("/mutate--v1-pod", ["batch/job", "pod"], True),
    ("/validate-apps-v1-deployment", ["deployment"], True),
    ("/validate-apps-v1-statefulset", ["deployment"], False),
    ("/mutate-jobset-x-k8s-io-v1alpha2-jobset", ["jobset.x-k8s.io/jobset"], True),
    ("/mutate-kubeflow-org-v1-pytorchjob", ["kubeflow.org/tfjob"], False),
    ("/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset", ["leaderworkerset.x-k8s.io/leaderworkerset"], True),
])
def test_webhooks_follow_the_integrations(path, frameworks, wanted):
    assert kc.webhook_wanted(path, frameworks) is wanted


def test_features_text_from_a_source_tree(tmp_path):
    f = tmp_path / kc.FEATURES_FILE
    f.parent.mkdir(parents=True)
    f.write_text(VERSIONED)

    class Build:
        source, commit, repo, version = f"source tree {tmp_path}", None, None, "v0.0.0-x"

    text, where = kc.features_text(Build())
    assert text == VERSIONED and where == str(f)


def test_if_known_gate_is_on_where_the_build_knows_it_and_absent_elsewhere():
    """kubernetes-sigs/kueue#13662: PrioritizePreemptorWorkloads exists from v0.18.6/v0.19.2 only, and Kueue
    refuses a gate it does not know; "if-known" turns it on where it exists."""
    cfg = kc.parse({"feature_gates": {"PrioritizePreemptorWorkloads": "if-known", "PartialAdmission": False}})
    assert cfg.if_known == ("PrioritizePreemptorWorkloads",)
    assert cfg.to_json()["featureGates"] == {"PartialAdmission": False, "PrioritizePreemptorWorkloads": "if-known"}
    with pytest.raises(KueueConfigError, match="declared 'if-known', but nothing said which gates"):
        cfg.apply(BASE)  # unresolved: which build is not known yet
    assert cfg.summary() == "featureGates PartialAdmission=false, PrioritizePreemptorWorkloads=if-known"

    new = cfg.resolve(kc.parse_gates(VERSIONED) | {"PrioritizePreemptorWorkloads": None})
    assert new.apply(BASE)["featureGates"] == {"VisibilityOnDemand": False, "PartialAdmission": False,
                                               "PrioritizePreemptorWorkloads": True}
    assert new.if_known_given() == {"PrioritizePreemptorWorkloads": True}
    assert "PrioritizePreemptorWorkloads=if-known (on: known to this build)" in new.summary()
    assert new.to_json() == cfg.to_json()  # the declaration is still what was declared

    old = cfg.resolve(kc.parse_gates(VERSIONED))
    assert old.apply(BASE)["featureGates"] == {"VisibilityOnDemand": False, "PartialAdmission": False}
    assert old.if_known_given() == {"PrioritizePreemptorWorkloads": False}
    assert "PrioritizePreemptorWorkloads=if-known (left off: unknown to this build)" in old.summary()
    kc.check_gates(old.effective_gates(), kc.parse_gates(VERSIONED), "v0.17.0", {})  # nothing unknown is given


def test_if_known_only_gate_gives_nothing_on_an_old_build_and_survives_over():
    cfg = kc.parse({"featureGates": {"PrioritizePreemptorWorkloads": "if-known"}, "fairSharing": True})
    both = kc.parse({"featureGates": {"PartialAdmission": False}}).over(cfg)
    assert both.if_known == ("PrioritizePreemptorWorkloads",) and both.known_gates is None
    got = both.resolve(["PartialAdmission"]).apply(BASE)
    assert got["featureGates"] == {"VisibilityOnDemand": False, "PartialAdmission": False}
    assert "fairSharing" in got
    assert kc.parse({"featureGates": {"PrioritizePreemptorWorkloads": "if-known"}}).resolve([]).apply(BASE) == BASE


def test_environment_resolves_if_known_from_the_build_or_from_what_kueue_reported(monkeypatch):
    from types import SimpleNamespace

    from harness.env.local import LocalEnvironment

    cfg = kc.parse({"feature_gates": {"PrioritizePreemptorWorkloads": "if-known"}})
    env = SimpleNamespace(bins=SimpleNamespace(kueue_build=None), kueue_reported_gates={}, kueue_version="v0.19.2")
    monkeypatch.setattr(kc, "features_text", lambda build: (VERSIONED.replace("LendingLimit", "PrioritizePreemptorWorkloads"), "x"))
    assert LocalEnvironment.resolve_kueue_config(env, cfg).if_known_given() == {"PrioritizePreemptorWorkloads": True}
    monkeypatch.setattr(kc, "features_text", lambda build: None)
    env.kueue_reported_gates = {"PartialAdmission": True}
    assert LocalEnvironment.resolve_kueue_config(env, cfg).if_known_given() == {"PrioritizePreemptorWorkloads": False}
    env.kueue_reported_gates = {}
    with pytest.raises(KueueConfigError, match="cannot tell whether Kueue v0.19.2 knows PrioritizePreemptorWorkloads"):
        LocalEnvironment.resolve_kueue_config(env, cfg)
    assert LocalEnvironment.resolve_kueue_config(env, kc.DEFAULT) is kc.DEFAULT
