"""The deploy/ files: container image, docker compose, Kubernetes manifests, SLURM.

These tests check the files statically: every file parses, the keys the tools require are there,
the names the files use for each other (services, volumes, claims, config maps, the scheduler
Service) match, and every run config shipped in deploy/ is a valid config for the right cluster.
The SLURM files also run for real in tests/test_slurm.py (against deploy/slurm/ci-cluster.sh's
controller) and the image in deploy/test-image.sh (the pre-release check); Kubernetes is only
checked here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dppca_dask.pipeline.cluster_config import KubernetesClusterConfig
from dppca_dask.pipeline.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
IMAGE = "dppca-dask:0.1.0"


def _run_config(text: str) -> RunConfig:
    return RunConfig.from_dict(yaml.safe_load(text))


# ---------------------------------------------------------------- container image


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    logical, current = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    assert not current, "dangling line continuation"
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in logical]


def test_dockerfile__installs_the_package_and_runs_the_cli():
    steps = _instructions(DEPLOY / "Dockerfile")
    known = {"FROM", "RUN", "COPY", "ADD", "ENV", "ARG", "WORKDIR", "USER", "EXPOSE",
             "ENTRYPOINT", "CMD", "LABEL", "HEALTHCHECK", "VOLUME", "SHELL", "STOPSIGNAL"}
    assert {name for name, _ in steps} <= known
    # the base is an argument (deploy/test-image.sh passes a debootstrap image), python by default
    assert steps[0][0] == "ARG" and re.match(r"BASE_IMAGE=python:3\.1[1-9]", steps[0][1])
    assert steps[1] == ("FROM", "${BASE_IMAGE}")
    # no `# syntax=` line: BuildKit would pull that frontend image from a registry
    assert not (DEPLOY / "Dockerfile").read_text().startswith("# syntax")
    assert any(name == "RUN" and 'pip install ".${EXTRAS}"' in args for name, args in steps)
    copies = [args.split() for name, args in steps if name == "COPY"]
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for *sources, _ in copies:  # sources are relative to the build context (the repo root)
        for source in sources:
            assert (ROOT / source).exists(), source
            assert f"!{source.rstrip('/')}" in {line.rstrip("/") for line in ignore}, source
    entry = json.loads(dict(steps)["ENTRYPOINT"])
    assert entry[-1] == "dppca-entrypoint" and "tini" in entry[0]
    assert dict(steps)["USER"] != "root"
    assert json.loads(dict(steps)["CMD"]) == ["--help"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["versions"], "dppca_dask: "), (["python", "-c", "print(6 * 7)"], "42"),
     (["dask", "--version"], "dask")],
)
def test_entrypoint__subcommands_and_full_commands(args, expected):
    script = DEPLOY / "entrypoint.sh"
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if shutil.which("dppca-dask", path=env["PATH"]) is None:
        pytest.skip("the dppca-dask console script is not installed")
    out = subprocess.run(["sh", str(script), *args], capture_output=True, text=True, env=env,
                         timeout=60, check=True)
    assert expected in out.stdout + out.stderr


# ---------------------------------------------------------------- docker compose

COMPOSE_TOP = {"version", "name", "services", "networks", "volumes", "configs", "secrets",
               "include"}
COMPOSE_SERVICE = {"image", "build", "command", "entrypoint", "ports", "volumes", "depends_on",
                   "healthcheck", "restart", "init", "environment", "deploy", "profiles",
                   "working_dir", "user", "networks"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def test_compose__schema_keys_and_services(compose):
    assert {k for k in compose if not k.startswith("x-")} <= COMPOSE_TOP
    services = compose["services"]
    assert set(services) == {"scheduler", "worker-1", "worker-2", "data", "runner"}
    for name, service in services.items():
        assert set(service) <= COMPOSE_SERVICE, name
        assert service["image"] == IMAGE, name
        for dep, cond in service.get("depends_on", {}).items():
            assert dep in services, (name, dep)
            assert cond["condition"] in {"service_started", "service_healthy",
                                         "service_completed_successfully"}
    builds = [s["build"] for s in services.values() if "build" in s]
    assert len(builds) == 1
    context = (DEPLOY / builds[0]["context"]).resolve()
    assert context == ROOT and (context / builds[0]["dockerfile"]).is_file()
    scheduler = services["scheduler"]
    assert scheduler["command"][:2] == ["dask", "scheduler"]
    # Published on the host's loopback only (the dashboard has no login).
    assert all(port.startswith("127.0.0.1:") for port in scheduler["ports"]), scheduler["ports"]
    assert "healthcheck" in scheduler
    for worker in ("worker-1", "worker-2"):
        command = services[worker]["command"]
        assert command[:3] == ["dask", "worker", "tcp://scheduler:8786"]
        assert services[worker]["depends_on"]["scheduler"]["condition"] == "service_healthy"


def _mounts(service: dict) -> dict[str, str]:
    """container path -> source (named volume or path relative to deploy/)."""
    return {m.split(":")[1]: m.split(":")[0] for m in service.get("volumes", [])}


def test_compose__runner_config_and_volumes(compose):
    services = compose["services"]
    named = set(compose["volumes"])
    for service in services.values():
        for target, source in _mounts(service).items():
            if source.startswith("."):
                assert (DEPLOY / source).exists(), source
            else:
                assert source in named, (target, source)
    runner = _mounts(services["runner"])
    config_file = DEPLOY / runner["/config/run.yaml"]
    cfg = _run_config(config_file.read_text())
    assert services["runner"]["command"] == ["run", "/config/run.yaml"]
    assert cfg.cluster.kind == "address" and cfg.cluster.address == "tcp://scheduler:8786"
    # The workers read the input themselves: the same volume at the same path everywhere.
    data_dir = str(Path(cfg.input.path).parent)
    for name in ("worker-1", "worker-2", "runner", "data"):
        assert _mounts(services[name])[data_dir] == "data", name
    assert cfg.output.directory.startswith("/output/") and runner["/output"] == "output"
    data_cmd = services["data"]["command"]
    assert data_cmd[:2] == ["python", "-c"] and cfg.input.path in data_cmd[2]


def test_service_compose__server_next_to_the_cluster_and_no_data_for_analysts():
    from dppca_dask.service.settings import ServiceConfig

    compose = yaml.safe_load((DEPLOY / "service-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"scheduler", "worker-1", "worker-2", "data", "server", "analyst"}
    named = set(compose["volumes"])
    for name, service in services.items():
        assert set(service) <= COMPOSE_SERVICE, name
        assert service["image"] == IMAGE
        for dep in service.get("depends_on", {}):
            assert dep in services
        for source in _mounts(service).values():
            assert (DEPLOY / source).exists() if source.startswith(".") else source in named
    server = services["server"]
    assert server["command"] == ["serve", "/config/service.yaml"]
    assert all(port.startswith("127.0.0.1:") for port in server["ports"])
    config = ServiceConfig.model_validate(yaml.safe_load(
        (DEPLOY / _mounts(server)["/config/service.yaml"]).read_text()))
    assert config.cluster.kind == "address" and config.cluster.address == "tcp://scheduler:8786"
    holders = {name for name, service in services.items() if "data" in _mounts(service).values()}
    assert holders == {"worker-1", "worker-2", "data", "server"}  # never the analyst's
    for dataset in config.datasets:
        folder = str(Path(dataset.path).parent)
        for name in ("worker-1", "worker-2", "server"):
            assert _mounts(services[name])[folder] == "data", name
    assert all(m.endswith(":ro") for m in server["volumes"] if m.startswith("data:"))
    analyst = services["analyst"]
    assert analyst["profiles"] == ["analyst"] and analyst["command"][0] == "submit"
    assert analyst["environment"]["DPPCA_SERVER"] == f"http://server:{config.listen.port}"
    submitted = yaml.safe_load((DEPLOY / _mounts(analyst)[analyst["command"][1]]).read_text())
    assert config.dataset(submitted["input"]["path"]) is not None
    assert _run_config(yaml.safe_dump(submitted)).output.directory.startswith("/home/dppca/")


# ---------------------------------------------------------------- Kubernetes


def _k8s_documents() -> dict[tuple[str, str], dict]:
    docs = {}
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        if path.name == "kubecluster.yaml":  # a run config, not a manifest
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            assert {"apiVersion", "kind", "metadata"} <= set(doc), path.name
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def _pod_volumes(pod_spec: dict) -> dict[str, dict]:
    names = {v["name"]: v for v in pod_spec.get("volumes", [])}
    for container in pod_spec["containers"]:
        assert {"name", "image"} <= set(container)
        for mount in container.get("volumeMounts", []):
            assert mount["name"] in names, mount
    return names


def test_kubernetes__manifests_parse_with_required_keys():
    docs = _k8s_documents()
    kinds = sorted(kind for kind, _ in docs)
    assert kinds == ["ConfigMap", "ConfigMap", "DaskCluster", "Deployment", "Job", "Job",
                     "PersistentVolumeClaim", "PersistentVolumeClaim", "PersistentVolumeClaim",
                     "Service"]
    claims = {name for kind, name in docs if kind == "PersistentVolumeClaim"}
    maps = {name for kind, name in docs if kind == "ConfigMap"}
    for (kind, name), doc in docs.items():
        if kind == "PersistentVolumeClaim":
            assert doc["apiVersion"] == "v1" and doc["spec"]["accessModes"]
            assert doc["spec"]["resources"]["requests"]["storage"]
        if kind in ("Job", "Deployment"):
            assert doc["apiVersion"] == ("batch/v1" if kind == "Job" else "apps/v1")
            pod = doc["spec"]["template"]["spec"]
            if kind == "Job":
                assert pod["restartPolicy"] in {"Never", "OnFailure"}, name
            for volume in _pod_volumes(pod).values():
                if "persistentVolumeClaim" in volume:
                    assert volume["persistentVolumeClaim"]["claimName"] in claims
                if "configMap" in volume:
                    assert volume["configMap"]["name"] in maps


def test_kubernetes__daskcluster_matches_the_operator_layout():
    docs = _k8s_documents()
    ((_, name),) = [key for key in docs if key[0] == "DaskCluster"]
    manifest = docs[("DaskCluster", name)]
    assert manifest["apiVersion"] == "kubernetes.dask.org/v1"
    spec = manifest["spec"]
    assert {"worker", "scheduler"} <= set(spec)
    worker_pod, scheduler_pod = spec["worker"]["spec"], spec["scheduler"]["spec"]
    _pod_volumes(worker_pod)
    # Same shape as the resource `cluster.kind: kubernetes` asks the operator for.
    generated = KubernetesClusterConfig(kind="kubernetes", name=name, image=IMAGE,
                                        n_workers=spec["worker"]["replicas"]).cluster_spec()
    gen = generated["spec"]
    assert spec["worker"]["replicas"] == gen["worker"]["replicas"] == 2
    for role, pod in (("worker", worker_pod), ("scheduler", scheduler_pod)):
        (container,) = pod["containers"]
        (expected,) = gen[role]["spec"]["containers"]
        assert container["name"] == expected["name"] == role
        assert container["image"] == IMAGE
        assert container["args"] == expected["args"]
        assert container["ports"] == expected["ports"]
    service = spec["scheduler"]["service"]
    assert service == gen["scheduler"]["service"]
    assert service["selector"]["dask.org/cluster-name"] == name


def test_kubernetes__runner_job_reaches_the_scheduler_service():
    docs = _k8s_documents()
    ((_, cluster),) = [key for key in docs if key[0] == "DaskCluster"]
    configmap = docs[("ConfigMap", "dppca-run-config")]
    cfg = _run_config(configmap["data"]["run.yaml"])
    assert cfg.cluster.kind == "address"
    assert cfg.cluster.address == f"tcp://{cluster}-scheduler:8786"  # the operator's Service
    job = docs[("Job", "dppca-run")]["spec"]["template"]["spec"]
    (runner,) = job["containers"]
    assert runner["args"] == ["run", "/config/run.yaml"]
    mounts = {m["mountPath"]: m["name"] for m in runner["volumeMounts"]}
    assert _pod_volumes(job)[mounts["/config"]]["configMap"]["name"] == "dppca-run-config"
    # The input is read by the workers: the same claim is mounted at the same path in both.
    data_dir = str(Path(cfg.input.path).parent)
    worker = docs[("DaskCluster", cluster)]["spec"]["worker"]["spec"]
    worker_mounts = {m["mountPath"]: m["name"] for m in worker["containers"][0]["volumeMounts"]}
    claim = _pod_volumes(job)[mounts[data_dir]]["persistentVolumeClaim"]["claimName"]
    assert _pod_volumes(worker)[worker_mounts[data_dir]]["persistentVolumeClaim"][
        "claimName"] == claim
    assert cfg.output.directory.startswith("/output/") and "/output" in mounts
    demo = docs[("Job", "dppca-demo-data")]["spec"]["template"]["spec"]["containers"][0]
    assert cfg.input.path in demo["args"][-1]


def test_kubernetes__release_service_next_to_the_cluster():
    from dppca_dask.service.settings import ServiceConfig

    docs = _k8s_documents()
    ((_, cluster),) = [key for key in docs if key[0] == "DaskCluster"]
    config = ServiceConfig.model_validate(yaml.safe_load(
        docs[("ConfigMap", "dppca-service-config")]["data"]["service.yaml"]))
    assert config.cluster.kind == "address"
    assert config.cluster.address == f"tcp://{cluster}-scheduler:8786"
    deployment = docs[("Deployment", "dppca-server")]["spec"]
    # one server per ledger: never two pods writing the state at once
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    pod = deployment["template"]["spec"]
    (server,) = pod["containers"]
    assert server["args"] == ["serve", "/config/service.yaml"]
    assert server["readinessProbe"]["httpGet"]["path"] == "/api/v1/health"
    mounts = {m["mountPath"]: m for m in server["volumeMounts"]}
    volumes = _pod_volumes(pod)
    assert volumes[mounts["/config"]["name"]]["configMap"]["name"] == "dppca-service-config"
    # the catalogue's data: the workers' claim, at the same path, read only
    worker = docs[("DaskCluster", cluster)]["spec"]["worker"]["spec"]
    worker_mounts = {m["mountPath"]: m["name"] for m in worker["containers"][0]["volumeMounts"]}
    for dataset in config.datasets:
        folder = str(Path(dataset.path).parent)
        claim = volumes[mounts[folder]["name"]]["persistentVolumeClaim"]
        assert mounts[folder]["readOnly"] and claim["readOnly"]
        assert _pod_volumes(worker)[worker_mounts[folder]]["persistentVolumeClaim"][
            "claimName"] == claim["claimName"]
    assert config.state_directory.startswith("/state/") and config.ledger.startswith("/state/")
    assert volumes[mounts["/state"]["name"]]["persistentVolumeClaim"]["claimName"] == \
        "dppca-state"
    service = docs[("Service", "dppca-server")]["spec"]
    labels = deployment["template"]["metadata"]["labels"]
    assert service["selector"] == labels == deployment["selector"]["matchLabels"]
    assert service["ports"][0]["targetPort"] == server["ports"][0]["name"]
    assert server["ports"][0]["containerPort"] == config.listen.port


def test_kubernetes__kubecluster_run_config():
    cfg = _run_config((DEPLOY / "kubernetes" / "kubecluster.yaml").read_text())
    assert cfg.cluster.kind == "kubernetes" and cfg.cluster.n_workers == 4
    assert cfg.cluster.cluster_spec()["metadata"]["name"] == "dppca"


# ---------------------------------------------------------------- SLURM

JOBQUEUE_SLURM_KEYS = {
    "name", "cores", "memory", "processes", "python", "interface", "death-timeout",
    "local-directory", "shared-temp-directory", "extra", "worker-command", "worker-extra-args",
    "shebang", "queue", "account", "walltime", "env-extra", "job-script-prologue", "job-cpu",
    "job-mem", "job-extra", "job-extra-directives", "job-directives-skip", "log-directory",
    "scheduler-options",
}


def test_slurm__batch_script_is_valid_bash():
    script = DEPLOY / "slurm" / "dppca.sbatch"
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    directives = [line for line in lines if line.startswith("#SBATCH")]
    assert directives and all(lines.index(d) < first_command for d in directives)
    text = script.read_text()
    assert "deploy/slurm/run.yaml" in text and "deploy/slurm/jobqueue.yaml" in text
    assert "dppca-dask run" in text


def test_slurm__jobqueue_config_and_run_config():
    jobqueue = yaml.safe_load((DEPLOY / "slurm" / "jobqueue.yaml").read_text())
    assert set(jobqueue) == {"jobqueue"} and set(jobqueue["jobqueue"]) == {"slurm"}
    assert set(jobqueue["jobqueue"]["slurm"]) <= JOBQUEUE_SLURM_KEYS
    cfg = _run_config((DEPLOY / "slurm" / "run.yaml").read_text())
    assert cfg.cluster.kind == "slurm" and cfg.cluster.n_jobs == 4


def test_slurm__job_script_renders_with_dask_jobqueue(tmp_path, monkeypatch):
    jobqueue = pytest.importorskip("dask_jobqueue")
    monkeypatch.chdir(tmp_path)  # SLURMCluster creates its log-directory (dask-logs) here
    import dask

    site = yaml.safe_load((DEPLOY / "slurm" / "jobqueue.yaml").read_text())["jobqueue"]["slurm"]
    # merged into dask-jobqueue's defaults key by key, as DASK_CONFIG=jobqueue.yaml would be
    settings = {f"jobqueue.slurm.{key}": value for key, value in site.items()}
    cfg = _run_config((DEPLOY / "slurm" / "run.yaml").read_text())
    with dask.config.set(settings), jobqueue.SLURMCluster(**cfg.cluster.backend_kwargs()) as c:
        script = c.job_script()
    assert "#SBATCH --cpus-per-task=8" in script and "#SBATCH -t 02:00:00" in script
    assert 'source "$HOME/venvs/dppca/bin/activate"' in script


def test_slurm__ci_cluster_script_is_valid_bash():
    script = DEPLOY / "slurm" / "ci-cluster.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    assert os.access(script, os.X_OK)
    text = script.read_text()
    for key in ("SlurmctldHost=$NODE(127.0.0.1)", "NodeAddr=127.0.0.1", "SlurmUser=root",
                "AuthType=auth/munge", "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none", "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core_Memory", "ReturnToService=2",
                "SlurmdParameters=config_overrides", "slurmctld -D -c"):
        assert key in text, key
    usage = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and "start|check|stop" in usage.stderr
    ci = (ROOT / ".ci" / "run").read_text()
    assert "deploy/slurm/ci-cluster.sh start" in ci and "ci-cluster.sh stop" in ci
    assert 'pip install -e ".[test]" && mypy dppca_dask && pytest' in ci


def test_ci_run__runs_the_lowest_versions_subset_and_the_image_check_after_the_suite():
    ci_dir = ROOT / ".ci"
    text = (ci_dir / "run").read_text()
    assert subprocess.run(["bash", "-n", str(ci_dir / "run")], check=False).returncode == 0
    suite = text.index('&& pytest "$@"')
    assert suite < text.index(".ci/lowest -n 2 $LOWEST_SUBSET") < text.index("deploy/test-image.sh\n")
    subset = re.search(r'LOWEST_SUBSET="([^"]+)"', text)
    assert subset, "no LOWEST_SUBSET in .ci/run"
    files = subset.group(1).split()
    assert len(files) >= 10
    missing = [f for f in files if not (ROOT / f).is_file()]
    assert not missing, f"LOWEST_SUBSET names test files that do not exist: {missing}"
    # the image check runs only where the machine allows, and says why when it does not
    fn = text[text.index("image_blocker() {"):text.index("\n}\n", text.index("image_blocker() {"))]
    probe = subprocess.run(["/bin/bash", "-c", fn + "\n}\nimage_blocker"], capture_output=True, text=True,
                           check=False, env={"PATH": "/nonexistent"})
    assert probe.stdout.strip() in ("not root", "no docker client"), probe.stdout


def test_image_check_script__host_network_only():
    script = DEPLOY / "test-image.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert "--bridge=none --iptables=false --ip6tables=false --ip-masq=false" in text
    assert "DOCKER_BUILDKIT=0 docker build --network host" in text
    assert "debootstrap --variant=minbase" in text and "docker import" in text
    runs = [line for line in text.splitlines() if re.search(r"docker run\b", line)]
    assert runs and all("--network host" in line or "in_image()" in line for line in runs), runs
    assert "docker network" not in text  # never a bridge network


# ---------------------------------------------------------------- README


def test_deploy_readme__covers_every_file():
    readme = (DEPLOY / "README.md").read_text()
    for section in ("Container image", "Docker compose", "Kubernetes", "SLURM"):
        assert re.search(rf"^## {section}", readme, re.MULTILINE), section
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path.name != "README.md":
            assert str(path.relative_to(DEPLOY)) in readme, path
