"""REST calls the Nemesis makes for plan steps and facts: straight to kube-apiserver with the admin identity
(never through the fault proxy), for any kind (harness/plan/steps.py KNOWN_KINDS, else the API's
discovery), with watches; a refusal becomes a StepError that says what kube-apiserver answered.
"""

from __future__ import annotations

import fnmatch
import json
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from harness.plan.steps import (
    KNOWN_KINDS,
    PATCH_TYPES,
    StepError,
    describe_patch,
    is_glob,
    object_label,
    parse_ref,
)


class KubeRest:
    """REST calls to kube-apiserver with a kubernetes ApiClient (the admin identity, direct: never through
    the fault proxy) for any kind: KNOWN_KINDS, else the API's discovery (read once per group)."""

    def __init__(self, api_client: Any) -> None:
        self.api = api_client
        self._discovered: dict[str, tuple[str, str, bool]] = {}
        self._lock = threading.Lock()

    # ---- kinds
    def resolve(self, kind: str, group: str | None = None, api_version: str | None = None) -> tuple[str, str, bool]:
        """(apiVersion, plural, namespaced) of `kind` (in `group`, or of `api_version`). Raises StepError if
        kube-apiserver serves no such kind."""
        known = KNOWN_KINDS.get(kind)
        if known and (group is None or known[0].split("/")[0] == group or (group == "core" and "/" not in known[0])) \
                and (api_version is None or api_version == known[0]):
            return known
        key = f"{kind}|{group or ''}|{api_version or ''}"
        with self._lock:
            if key in self._discovered:
                return self._discovered[key]
        versions = [api_version] if api_version else self._group_versions(group)
        for gv in versions:
            base = f"/api/{gv}" if "/" not in gv else f"/apis/{gv}"
            status, data = self.request("GET", base)
            if status != 200:
                continue
            for r in data.get("resources", []):
                if r.get("kind") == kind and "/" not in r.get("name", ""):
                    found = (gv, r["name"], bool(r.get("namespaced")))
                    with self._lock:
                        self._discovered[key] = found
                    return found
        raise StepError(f"kube-apiserver serves no kind {kind}" + (f" in group {group}" if group else "")
                        + (f" at {api_version}" if api_version else ""))

    def _group_versions(self, group: str | None) -> list[str]:
        out = ["v1"] if group in (None, "core") else []
        status, data = self.request("GET", "/apis")
        for g in data.get("groups", []) if status == 200 else []:
            if group is None or g.get("name") == group:
                pref = (g.get("preferredVersion") or {}).get("groupVersion")
                out += [pref] if pref else []
                out += [v["groupVersion"] for v in g.get("versions", []) if v.get("groupVersion") != pref]
        return out

    def path(self, api_version: str, plural: str, namespaced: bool, namespace: str | None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced:
            if not namespace:
                raise StepError(f"{plural} are namespaced: the object needs a namespace")
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base

    # ---- requests
    def request(self, method: str, path: str, query: Mapping[str, Any] | None = None, body: Any = None,
                content_type: str = "application/json", timeout: float = 10.0, stream: bool = False) -> tuple[int, Any]:
        """(HTTP status, parsed JSON body) — or, with `stream`, (status, the open urllib3 response). Raises
        StepError when kube-apiserver cannot be reached."""
        from kubernetes.client.exceptions import ApiException

        url_path = path + (f"?{urlencode(query)}" if query else "")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            method, url, headers, data, _ = self.api.param_serialize(
                method, url_path, header_params=headers,
                body=body, auth_settings=["BearerToken"])  # the REST client serializes JSON and apply bodies
            resp = self.api.call_api(method, url, header_params=headers, body=data, _request_timeout=timeout)
        except (ApiException, OSError) as e:
            raise StepError(f"{method} {path}: {e}") from None
        except Exception as e:  # noqa: BLE001 - urllib3 errors (timeouts, connection refused)
            raise StepError(f"{method} {path}: {type(e).__name__}: {e}") from None
        if stream:
            return resp.status, resp.response
        raw = resp.read()
        try:
            return resp.status, json.loads(raw) if raw else {}
        except ValueError:
            return resp.status, {"message": raw[:300].decode(errors="replace")}

    @staticmethod
    def _refused(status: int, data: Any, what: str) -> StepError:
        msg = data.get("message") if isinstance(data, dict) else None
        reason = data.get("reason") if isinstance(data, dict) else None
        return StepError(f"{what}: kube-apiserver answered {status}{' ' + reason if reason else ''}: {msg or data}")

    def target(self, spec: Mapping[str, Any], default_ns: str, glob: bool = False) -> tuple[str, str, bool, str | None, str]:
        """(apiVersion, plural, namespaced, namespace, name) of a spec's `object` (and `namespace`). With `glob`,
        a name with GLOB_CHARS is looked up: the one object of that kind and namespace whose name it matches
        (raises StepError naming what matched when none or several do)."""
        api_version, plural, namespaced, ns, names = self.targets(spec, default_ns, each=False, glob=glob)
        return api_version, plural, namespaced, ns, names[0]

    def targets(self, spec: Mapping[str, Any], default_ns: str, each: bool,
                glob: bool = True) -> tuple[str, str, bool, str | None, list[str]]:
        """Like `target` with a glob, but the names of the objects it matches: exactly one, or with `each` one or
        more (a step's `each: true`). Raises StepError naming what matched otherwise."""
        kind, group, name = parse_ref(spec.get("object"))
        api_version, plural, namespaced = self.resolve(kind, group)
        ns = (spec.get("namespace") or default_ns) if namespaced else None
        if not (glob and is_glob(name)):
            return api_version, plural, namespaced, ns, [name]
        status, data = self.request("GET", self.path(api_version, plural, namespaced, ns))
        if status != 200:
            raise self._refused(status, data, f"list {kind} to find {name}")
        names = sorted(str((o.get("metadata") or {}).get("name")) for o in data.get("items") or [])
        hits = [n for n in names if fnmatch.fnmatchcase(n, name)]
        if not hits or (len(hits) > 1 and not each):
            where = f" in namespace {ns}" if ns else ""
            how = "at least one" if each else "exactly one"
            raise StepError(f"{spec.get('object')}: the glob must match {how} {kind}{where}; it matches "
                            f"{len(hits)} ({', '.join(hits[:5]) or 'none'}; there are {len(names)})")
        return api_version, plural, namespaced, ns, hits

    def create(self, obj: dict[str, Any], default_ns: str) -> dict[str, Any]:
        """Create `obj` (a namespaced kind without a namespace goes to `default_ns`). Returns the created
        object. Raises StepError with kube-apiserver's answer."""
        kind = obj["kind"]
        api_version, plural, namespaced = self.resolve(kind, api_version=obj.get("apiVersion"))
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        if namespaced:
            meta["namespace"] = meta.get("namespace") or default_ns
        else:
            meta.pop("namespace", None)
        status, data = self.request("POST", self.path(api_version, plural, namespaced, meta.get("namespace")), body=obj)
        if status not in (200, 201):
            raise self._refused(status, data, f"create {object_label(obj)}")
        return data

    def patch(self, spec: Mapping[str, Any], default_ns: str) -> dict[str, Any]:
        """Do a `patch` step's patch (patch_spec's form; its object's name may be a glob, GLOB_CHARS). Returns
        the patched object. Raises StepError."""
        return self.patch_each(spec, default_ns)[-1]

    def patch_each(self, spec: Mapping[str, Any], default_ns: str) -> list[dict[str, Any]]:
        """Do a `patch` step's patch on its one object, or with `each: true` on every object its glob matches, in
        name order. Returns the patched objects. Raises StepError (the objects before it were patched)."""
        api_version, plural, namespaced, ns, names = self.targets(spec, default_ns, each=bool(spec.get("each")))
        return [self._patch_one(spec, api_version, plural, namespaced, ns, name) for name in names]

    def _patch_one(self, spec: Mapping[str, Any], api_version: str, plural: str, namespaced: bool, ns: str | None,
                   name: str) -> dict[str, Any]:
        t = next(t for t in PATCH_TYPES if spec.get(t) is not None)
        query: dict[str, Any] = {}
        body = spec[t]
        if t == "apply":
            kind = parse_ref(spec["object"])[0]
            meta = {"name": name, **({"namespace": ns} if ns else {})}
            body = {"apiVersion": api_version, "kind": kind, **body,
                    "metadata": {**(body.get("metadata") or {}), **meta}}
            query = {"fieldManager": spec.get("field_manager", "kueue-harness"),
                     **({"force": "true"} if spec.get("force", True) else {})}
        status, data = self.request("PATCH", self.path(api_version, plural, namespaced, ns, name, spec.get("subresource")),
                                    query=query, body=body, content_type=PATCH_TYPES[t])
        if status != 200:
            raise self._refused(status, data, describe_patch(spec))
        return data

    def delete(self, spec: Mapping[str, Any], default_ns: str) -> dict[str, Any]:
        """Do a `delete` step (its object's name may be a glob, GLOB_CHARS). Returns kube-apiserver's answer
        (the object, or a Status). Raises StepError."""
        api_version, plural, namespaced, ns, name = self.target(spec, default_ns, glob=True)
        body = {"kind": "DeleteOptions", "apiVersion": "v1",
                **({"propagationPolicy": spec["propagation"]} if spec.get("propagation") else {})}
        status, data = self.request("DELETE", self.path(api_version, plural, namespaced, ns, name), body=body)
        if status not in (200, 202):
            raise self._refused(status, data, f"delete {spec.get('object')}")
        return data

    def _selector(self, spec: Mapping[str, Any], default_ns: str) -> tuple[str, dict[str, str]]:
        """(the list path of a spec's kind and namespace, the query naming its object): a field selector for
        an exact name; nothing for a glob (GLOB_CHARS), whose objects the caller picks out with fnmatch."""
        kind, group, name = parse_ref(spec.get("object"))
        api_version, plural, namespaced = self.resolve(kind, group)
        ns = (spec.get("namespace") or default_ns) if namespaced else None
        return (self.path(api_version, plural, namespaced, ns),
                {} if is_glob(name) else {"fieldSelector": f"metadata.name={name}"})

    def list_objects(self, spec: Mapping[str, Any], default_ns: str) -> tuple[list[dict[str, Any]], str]:
        """(the objects, the list's resourceVersion) of a spec's `object`: the one object of an exact name (or
        none), or every object of its kind and namespace when the name is a glob (the caller matches them), so
        a watch can go on from there. Raises StepError."""
        path, query = self._selector(spec, default_ns)
        status, data = self.request("GET", path, query=query)
        if status != 200:
            raise self._refused(status, data, f"list {spec.get('object')}")
        return list(data.get("items") or []), str((data.get("metadata") or {}).get("resourceVersion") or "")

    def watch_objects(self, spec: Mapping[str, Any], default_ns: str, resource_version: str,
                      seconds: int = 10) -> Any:
        """The open watch response, from `resource_version`, for the objects `list_objects` lists (kube-apiserver
        ends it after `seconds`); iterate it with `watch_events`. Raises StepError."""
        path, query = self._selector(spec, default_ns)
        status, resp = self.request("GET", path,
                                    query={**query, "watch": "true", "resourceVersion": resource_version,
                                           "allowWatchBookmarks": "true", "timeoutSeconds": str(seconds)},
                                    timeout=seconds + 5, stream=True)
        if status != 200:
            try:
                data = json.loads(resp.read() or b"{}")
            except ValueError:
                data = {}
            raise self._refused(status, data, f"watch {spec.get('object')}")
        return resp


def watch_events(resp: Any) -> Any:
    """(type, object) for each line of an open watch response."""
    from kubernetes.watch.watch import iter_resp_lines

    try:
        for line in iter_resp_lines(resp):
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            yield ev.get("type"), ev.get("object") or {}
    finally:
        resp.release_conn()


