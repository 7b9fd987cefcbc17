"""The Kubernetes manifests (packaging/kubernetes), checked without a cluster.

Every document parses; the objects name each other consistently (selectors
match the pod labels, probes and the Service name a declared port, the
config volume names the Secret); the Secret's config.toml loads in the real
binary; the drain story holds together with the image (STOPSIGNAL, preStop,
grace period, shutdown_timeout).  test_container.py runs the Deployment's
container args, mounts and preStop hook in docker.
"""
import glob
import os
import re
import tomllib

import pytest
import yaml

from conftest import run_runner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(ROOT, "packaging", "kubernetes")
DOCKERFILE = os.path.join(ROOT, "packaging", "container", "Dockerfile")
API_VERSIONS = {
    "Deployment": "apps/v1",
    "Secret": "v1",
    "PodDisruptionBudget": "policy/v1",
    "Service": "v1",
    "ServiceMonitor": "monitoring.coreos.com/v1",
}
GITLAB_DEFAULT_JOB_TIMEOUT = 3600


@pytest.fixture(scope="module")
def docs():
    files = sorted(glob.glob(os.path.join(K8S, "*.yaml")))
    assert files, f"no manifests in {K8S}"
    out = {}
    for path in files:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                where = os.path.basename(path)
                for key in ("apiVersion", "kind", "metadata"):
                    assert key in doc, f"{where}: no {key}"
                assert doc["metadata"].get("name"), f"{where}: no metadata.name"
                key = (doc["kind"], doc["metadata"]["name"])
                assert key not in out, f"{where}: {key} defined twice"
                out[key] = doc
    return out


def one(docs, kind):
    found = [d for (k, _), d in docs.items() if k == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pod(docs):
    dep = one(docs, "Deployment")
    return dep, dep["spec"]["template"], dep["spec"]["template"]["spec"]["containers"][0]


def arg(container, flag):
    args = container["args"]
    assert flag in args, f"{flag} not in the container's args {args}"
    return args[args.index(flag) + 1]


def dockerfile():
    with open(DOCKERFILE) as f:
        return f.read()


def secret_config(docs, dep):
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if "secret" in v)
    secret = docs[("Secret", vol["secret"]["secretName"])]
    data = secret.get("stringData") or {}
    assert "config.toml" in data, "the Secret has no config.toml"
    return data["config.toml"]


# ---------------------------------------------------------------------------

def test_every_object_has_its_kind_and_api_version(docs):
    kinds = {k for k, _ in docs}
    assert kinds == set(API_VERSIONS), kinds
    for (kind, name), d in docs.items():
        assert d["apiVersion"] == API_VERSIONS[kind], (kind, name, d["apiVersion"])


def test_selectors_match_the_pods(docs):
    dep, tpl, _ = pod(docs)
    labels = tpl["metadata"]["labels"]
    assert matches(dep["spec"]["selector"]["matchLabels"], labels)
    assert matches(one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], labels)
    svc = one(docs, "Service")
    assert matches(svc["spec"]["selector"], labels)
    sm = one(docs, "ServiceMonitor")
    assert matches(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"])


def test_ports_probes_and_metrics_name_the_declared_port(docs):
    _, _, ctr = pod(docs)
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert "metrics" in ports
    # The runner listens where the port says, on every address of the pod.
    assert arg(ctr, "--listen-address") == f"0.0.0.0:{ports['metrics']}"
    for probe, path in (("livenessProbe", "/health/live"), ("readinessProbe", "/health/ready")):
        get = ctr[probe]["httpGet"]
        assert get["port"] in ports, f"{probe} port {get['port']!r} is not a container port"
        # A draining runner is live but not ready: liveness must not be /health/ready.
        assert get["path"] == path, (probe, get["path"])
    svc = one(docs, "Service")
    svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert svc_ports["metrics"]["targetPort"] in ports
    sm = one(docs, "ServiceMonitor")
    for ep in sm["spec"]["endpoints"]:
        assert ep["port"] in svc_ports and ep["path"] == "/metrics"
    # The runner's health endpoints are these paths (runner/metrics_server.c serves them).
    with open(os.path.join(ROOT, "runner", "metrics_server.c")) as f:
        src = f.read()
    for path in ("/health/live", "/health/ready", "/metrics"):
        assert f'"{path}"' in src


def test_config_secret_is_mounted_where_the_runner_reads_it_and_loads(docs, runner_bin,
                                                                      tmp_path):
    dep, tpl, ctr = pod(docs)
    spec = tpl["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    for m in ctr["volumeMounts"]:
        assert m["name"] in vols, f"volumeMount {m['name']} names no volume"
    cfg_path = arg(ctr, "--config")
    secret_mounts = [m for m in ctr["volumeMounts"] if "secret" in vols[m["name"]]]
    assert len(secret_mounts) == 1
    m = secret_mounts[0]
    assert m.get("readOnly") is True
    assert os.path.dirname(cfg_path) == m["mountPath"]
    secret = vols[m["name"]]["secret"]
    assert ("Secret", secret["secretName"]) in docs, f"no Secret {secret['secretName']}"
    # Secret files are root's: the runner reads config.toml through fsGroup.
    assert secret["defaultMode"] == 0o440
    assert "fsGroup" in spec["securityContext"]

    text = secret_config(docs, dep)
    path = tmp_path / "config.toml"
    path.write_text(text)
    p = run_runner(["list", "--config", str(path)])
    assert p.returncode == 0, p.stderr
    assert re.search(r"^k8s-runner\s+Executor=shell\s", p.stdout, re.M), p.stdout
    assert "WARNING" not in p.stderr and "ERROR" not in p.stderr, p.stderr
    cfg = tomllib.loads(text)
    # An example: no real token in the repository.
    for r in cfg["runners"]:
        assert "REPLACE" in r["token"], r["token"]


def test_pods_run_as_the_images_non_root_user_with_a_read_only_root(docs):
    _, tpl, ctr = pod(docs)
    psc = tpl["spec"]["securityContext"]
    assert psc["runAsNonRoot"] is True
    uid = int(re.search(r"^ARG RUNNER_UID=(\d+)$", dockerfile(), re.M).group(1))
    assert psc["runAsUser"] == uid != 0
    sc = ctr["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    # What the runner and its jobs write is on emptyDirs.
    vols = {v["name"]: v for v in tpl["spec"]["volumes"]}
    writable = [m["mountPath"] for m in ctr["volumeMounts"]
                if "emptyDir" in vols[m["name"]] and not m.get("readOnly")]
    for path in (arg(ctr, "--working-directory"), arg(ctr, "--state-dir"), "/tmp"):
        assert any(path == w or path.startswith(w + "/") for w in writable), \
            f"{path} is not on a writable volume ({writable})"
    res = ctr["resources"]
    assert res["requests"]["cpu"] and res["requests"]["memory"] and res["limits"]["memory"]


def test_stopping_a_pod_drains_its_jobs(docs):
    dep, tpl, ctr = pod(docs)
    # The image stops with SIGQUIT (drain), and so does the preStop hook for
    # runtimes that would send SIGTERM (interrupt).
    assert re.search(r"^STOPSIGNAL SIGQUIT$", dockerfile(), re.M)
    hook = " ".join(ctr["lifecycle"]["preStop"]["exec"]["command"])
    assert "kill -QUIT 1" in hook and "kill -0 1" in hook, hook
    # SIGKILL only after a job of GitLab's default timeout and the drain's own limit.
    cfg = tomllib.loads(secret_config(docs, dep))
    grace = tpl["spec"]["terminationGracePeriodSeconds"]
    assert grace >= GITLAB_DEFAULT_JOB_TIMEOUT + cfg["shutdown_timeout"], grace
    # Rolling updates and disruptions never take more than one pod down at once.
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pdb = one(docs, "PodDisruptionBudget")["spec"]
    assert pdb.get("maxUnavailable") == 1 and dep["spec"]["replicas"] >= 2
    # A runner's limit never asks for more than concurrent lets it run.
    for r in cfg["runners"]:
        assert 0 < r.get("limit", 0) <= cfg["concurrent"]
