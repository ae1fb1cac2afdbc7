#!/usr/bin/env python3
"""Checks deploy/kubernetes/*.yaml for what README "Scaling out" relies on (Debian has no Kubernetes schema
checker): a Deployment running `tensorfold serve` on 0.0.0.0 with its port named and probed (startup,
readiness, liveness on /health), GPU and memory requests, Prometheus scrape annotations on the pod, the
model directory from a volume whose claim is in the files and whose mount holds the checkpoint argument, and
a Service whose selector and targetPort reach those pods. Planted controls: copies with a probe removed, a
Service port that reaches nothing, and a checkpoint outside the mount must each fail.

  python3 tests/deploy/check_manifests.py deploy/kubernetes
"""
import copy
import glob
import os
import sys

import yaml


def problems(docs):
    out = []
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d.get("kind"), []).append(d)
    deps, svcs, pvcs = by_kind.get("Deployment", []), by_kind.get("Service", []), by_kind.get("PersistentVolumeClaim", [])
    if not deps or not svcs:
        return ["need a Deployment and a Service"]
    claims = {p["metadata"]["name"] for p in pvcs}
    for dep in deps:
        pod = dep["spec"]["template"]
        labels = pod["metadata"].get("labels", {})
        if dep["spec"]["selector"].get("matchLabels", {}).items() - labels.items():
            out.append("the Deployment's selector does not match its pod labels")
        ann = pod["metadata"].get("annotations", {})
        if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/path") != "/metrics":
            out.append("pod: no Prometheus scrape annotations for /metrics")
        spec = pod["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            args = c.get("args", [])
            if not args or args[0] != "serve":
                out.append("container does not run `serve`")
                continue
            if "--host" not in args or args[args.index("--host") + 1] != "0.0.0.0":
                out.append("serve must listen on 0.0.0.0")
            port = int(args[args.index("--port") + 1]) if "--port" in args else 8080
            named = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            if port not in named.values():
                out.append(f"containerPort {port} (serve --port) is not declared")
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                g = c.get(probe, {}).get("httpGet", {})
                p = named.get(g.get("port"), g.get("port"))
                if g.get("path") != "/health" or p != port:
                    out.append(f"{probe} must GET /health on port {port}")
            res = c.get("resources", {})
            if "nvidia.com/gpu" not in res.get("limits", {}) or "memory" not in res.get("requests", {}):
                out.append("resources: a GPU limit and a memory request are expected")
            mounts = c.get("volumeMounts", [])
            ckpt = args[1] if len(args) > 1 else ""
            if not any(ckpt.startswith(m["mountPath"].rstrip("/") + "/") for m in mounts):
                out.append(f"the checkpoint {ckpt} is not under a mounted volume")
            for m in mounts:
                v = volumes.get(m["name"])
                if v is None:
                    out.append(f"volumeMount {m['name']} has no volume")
                elif "persistentVolumeClaim" in v and v["persistentVolumeClaim"]["claimName"] not in claims:
                    out.append(f"claim {v['persistentVolumeClaim']['claimName']} is not in the manifests")
            for svc in svcs:
                if svc["spec"].get("selector", {}).items() - labels.items():
                    out.append(f"Service {svc['metadata']['name']} selects no pod of this Deployment")
                for p in svc["spec"]["ports"]:
                    t = p.get("targetPort", p["port"])
                    if named.get(t, t) != port:
                        out.append(f"Service port {p['port']} targets {t}, not the serve port {port}")
    return out


def main(argv):
    files = sorted(glob.glob(os.path.join(argv[1], "*.yaml")))
    docs = [d for f in files for d in yaml.safe_load_all(open(f)) if d]
    bad = problems(docs)
    for b in bad:
        print("FAIL:", b)
    if not files or bad:
        return 1
    # Planted controls: each broken copy must be reported.
    def broken(edit):
        c = copy.deepcopy(docs)
        edit(c)
        return problems(c)
    dep = next(i for i, d in enumerate(docs) if d["kind"] == "Deployment")
    svc = next(i for i, d in enumerate(docs) if d["kind"] == "Service")
    controls = {
        "no readiness probe": lambda c: c[dep]["spec"]["template"]["spec"]["containers"][0].pop("readinessProbe"),
        "Service port reaching nothing": lambda c: c[svc]["spec"]["ports"][0].update(targetPort=9999),
        "checkpoint outside the mount": lambda c: c[dep]["spec"]["template"]["spec"]["containers"][0]["args"]
        .__setitem__(1, "/data/model"),
    }
    for name, edit in controls.items():
        if not broken(edit):
            print("FAIL: planted control not caught:", name)
            return 1
    print(f"{len(files)} manifest file(s), {len(docs)} objects: every check passes; {len(controls)} controls caught")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
