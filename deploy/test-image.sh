#!/usr/bin/env bash
# The container check (.ci/run runs it after the suite where the machine allows; ~2-5 min, ~1.6 GB):
# builds deploy/Dockerfile, runs a Dask scheduler, two workers and the runner as containers on
# the host network, kills a worker while the Kendall pass runs, and checks that the release equals
# the one of a LocalCluster run in the same image (bit for bit, and the same single ledger record).
#
#   sudo deploy/test-image.sh          # from anywhere; prints "image check passed" at the end
#
# Needs root, docker (client) and dockerd. Without a running daemon it starts its own
# (`dockerd --bridge=none --iptables=false ...`, own data/exec root and socket) and stops it at the
# end. Containers use `--network host` only (never a bridge network) and listen on 127.0.0.1.
# Without a base image (DPPCA_BASE_IMAGE, default dppca-base:bookworm) it builds one from
# `debootstrap --variant=minbase bookworm` + `docker import`, so no image registry is needed.
# The build uses the legacy builder (DOCKER_BUILDKIT=0) with `--network host`, on a copy of the
# build context holding only what Dockerfile.dockerignore lets through, plus the machine's CA
# bundle (deploy/certs/ca-bundle.crt) for pip when TLS to the package index is inspected.
#
# Settings (environment): DPPCA_DOCKER_DIR (daemon state, default /var/tmp/dppca-docker: the base
# image is kept between runs), DPPCA_IMAGE (default dppca-dask:image-check), DPPCA_BASE_IMAGE,
# DPPCA_IMAGE_CHECK_DIR (data, configs, outputs, logs; default a new directory under /tmp),
# DEBIAN_MIRROR (default http://deb.debian.org/debian), CA_BUNDLE (default the system bundle).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
DOCKER_DIR="${DPPCA_DOCKER_DIR:-/var/tmp/dppca-docker}"
IMAGE="${DPPCA_IMAGE:-dppca-dask:image-check}"
BASE_IMAGE="${DPPCA_BASE_IMAGE:-dppca-base:bookworm}"
WORK="${DPPCA_IMAGE_CHECK_DIR:-$(mktemp -d /tmp/dppca-image-check.XXXXXX)}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
TAG="dppca-check-$$"                       # names of the containers started here
STARTED_DOCKERD=""

say() { echo "test-image: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }
step() { say "[$(date +%H:%M:%S)] $*"; }

cleanup() {
    local code=$?
    if docker info >/dev/null 2>&1; then
        local ours
        ours="$(docker ps -aq --filter "name=^$TAG-" 2>/dev/null || true)"
        # shellcheck disable=SC2086
        [ -z "$ours" ] || docker rm -f $ours >/dev/null 2>&1 || true
    fi
    if [ -n "$STARTED_DOCKERD" ]; then
        local pid
        pid="$(cat "$DOCKER_DIR/dockerd.pid" 2>/dev/null || echo "$STARTED_DOCKERD")"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 150); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
        [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
        say "stopped the dockerd started here ($pid)"
    fi
    exit "$code"
}
trap cleanup EXIT

# ------------------------------------------------------------------ daemon
command -v docker >/dev/null || die "no docker client on the PATH"
if ! docker info >/dev/null 2>&1; then
    command -v dockerd >/dev/null || die "no dockerd (Debian: apt-get install docker.io)"
    [ "$(id -u)" = 0 ] || die "starting dockerd needs root"
    mkdir -p "$DOCKER_DIR"/{data,exec}
    step "starting dockerd (bridge none, no iptables; state in $DOCKER_DIR)"
    dockerd --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
        --data-root "$DOCKER_DIR/data" --exec-root "$DOCKER_DIR/exec" \
        --pidfile "$DOCKER_DIR/dockerd.pid" --host "unix://$DOCKER_DIR/docker.sock" \
        >"$DOCKER_DIR/dockerd.log" 2>&1 </dev/null &
    STARTED_DOCKERD=$!
    export DOCKER_HOST="unix://$DOCKER_DIR/docker.sock"
    for _ in $(seq 150); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
    docker info >/dev/null 2>&1 || { tail -5 "$DOCKER_DIR/dockerd.log" >&2; die "dockerd did not answer"; }
fi

# ------------------------------------------------------------------ base image
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || die "no base image $BASE_IMAGE and no debootstrap (apt-get install debootstrap)"
    step "building the base image $BASE_IMAGE with debootstrap (minbase, bookworm)"
    rootfs="$WORK/rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -5 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
fi

# ------------------------------------------------------------------ image
step "building $IMAGE from deploy/Dockerfile (base $BASE_IMAGE)"
context="$WORK/context"
rm -rf "$context" && mkdir -p "$context/deploy"
cp -r "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/dppca_dask" "$context/"
cp -r "$REPO/deploy/entrypoint.sh" "$REPO/deploy/certs" "$REPO/deploy/Dockerfile" "$context/deploy/"
find "$context/dppca_dask" -name __pycache__ -prune -exec rm -rf {} +
[ -s "$CA_BUNDLE" ] && cp "$CA_BUNDLE" "$context/deploy/certs/ca-bundle.crt"
started=$(date +%s)
DOCKER_BUILDKIT=0 docker build --network host -f "$context/deploy/Dockerfile" \
    --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$IMAGE" "$context" >"$WORK/build.log" 2>&1 \
    || { tail -20 "$WORK/build.log" >&2; die "docker build failed (log: $WORK/build.log)"; }
say "built in $(( $(date +%s) - started )) s; $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.2f GB", $1/1e9}')"
docker run --rm --network host "$IMAGE" versions | sed -n 1,3p

# ------------------------------------------------------------------ data and configs
mkdir -p "$WORK"/{data,output,config}
chmod 0777 "$WORK/data" "$WORK/output"          # the image runs as uid 1000
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
address="tcp://127.0.0.1:$port"
write_config() {  # name, cluster section (YAML flow mapping)
    cat >"$WORK/config/$1.yaml" <<EOF
input: {path: /data/gau.zarr, array: X}
task: loading
privacy: {eps: 1.0, delta: 1.0e-5}
loading: {block_rows: 1000}
cluster: $2
output: {directory: /output/$1, formats: [zarr]}
rng: 2024
EOF
}
write_config local "{kind: local, n_workers: 2, memory_limit: 2GiB}"
write_config cluster "{kind: address, address: '$address', timeout: 120}"
mounts=(-v "$WORK/data:/data" -v "$WORK/output:/output" -v "$WORK/config:/config:ro")
in_image() { docker run --rm --network host "${mounts[@]}" "$@"; }

step "writing the demo dataset (40,000 x 20)"
in_image "$IMAGE" python -c "from dppca_dask.io.datasets import write_demo_dataset as w; w('/data/gau.zarr', n_per_group=8000)"

step "reference: a LocalCluster run in the image"
in_image -e DPPCA_LEDGER__URL=/output/local-ledger.sqlite "$IMAGE" run --quiet /config/local.yaml \
    >"$WORK/local.log" 2>&1 || { cat "$WORK/local.log" >&2; die "the local run failed"; }

# ------------------------------------------------------------------ scheduler, workers, runner
step "scheduler on $address and two workers (containers on the host network)"
docker run -d --name "$TAG-scheduler" --network host "$IMAGE" \
    dask scheduler --host 127.0.0.1 --port "$port" --dashboard-address 127.0.0.1:0 >/dev/null
for i in 1 2; do
    docker run -d --name "$TAG-worker-$i" --network host -v "$WORK/data:/data:ro" "$IMAGE" \
        dask worker "$address" --name "worker-$i" --nthreads 1 --memory-limit 2GiB \
        --host 127.0.0.1 --dashboard-address 127.0.0.1:0 --death-timeout 120 >/dev/null
done

# a monitor client prints the name of a worker that holds a finished Kendall unit and runs another
monitor='
import sys, time
from distributed import Client
unit = lambda key: str(key).startswith("_unit")
with Client(sys.argv[1], timeout=120) as c:
    c.wait_for_workers(2, timeout=120)
    print("ready", flush=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        held = c.has_what()
        for w, keys in c.processing().items():
            if any(map(unit, keys)) and any(map(unit, held.get(w, ()))):
                print(c.scheduler_info()["workers"][w]["name"], flush=True)
                sys.exit(0)
        time.sleep(0.02)
sys.exit("the Kendall pass was never seen")
'
docker run -d --name "$TAG-monitor" --network host "$IMAGE" python -c "$monitor" "$address" >/dev/null
for _ in $(seq 600); do docker logs "$TAG-monitor" 2>/dev/null | grep -q ready && break; sleep 0.2; done
docker logs "$TAG-monitor" 2>&1 | grep -q ready || { docker logs "$TAG-monitor" >&2; die "the workers did not join"; }

step "runner: the release on the scheduler"
docker run -d --name "$TAG-runner" --network host "${mounts[@]}" \
    -e DPPCA_LEDGER__URL=/output/cluster-ledger.sqlite "$IMAGE" run /config/cluster.yaml >/dev/null
[ "$(docker wait "$TAG-monitor")" = 0 ] || { docker logs "$TAG-monitor" >&2; die "no worker was seen mid-pass"; }
victim="$(docker logs "$TAG-monitor" 2>/dev/null | tail -1)"
case "$victim" in worker-1|worker-2) ;; *) die "unexpected monitor output: $victim" ;; esac
[ "$(docker inspect -f '{{.State.Running}}' "$TAG-runner")" = true ] || die "the runner ended before the kill"
docker kill "$TAG-$victim" >/dev/null
step "killed $victim mid-pass"
code="$(docker wait "$TAG-runner")"
docker logs "$TAG-runner" >"$WORK/runner.log" 2>&1
docker logs "$TAG-scheduler" >"$WORK/scheduler.log" 2>&1
[ "$code" = 0 ] || { tail -20 "$WORK/runner.log" >&2; die "the runner exited with $code"; }
grep -q "Remove worker.*$victim" "$WORK/scheduler.log" \
    || die "the scheduler log does not show $victim removed (log: $WORK/scheduler.log)"

# ------------------------------------------------------------------ compare
compare='
import numpy as np
from dppca_dask import load_result
from dppca_dask.pipeline.ledger import Ledger
a, b = (load_result(f"/output/{name}/loading.zarr") for name in ("local", "cluster"))
same = np.array_equal(a.directions.values, b.directions.values)
records = b.metadata["ledger"]
print(f"same release: {same} | ledger records: {len(records)}")
assert same, float(np.abs(a.directions.values - b.directions.values).max())
assert a.metadata["ledger"] == b.metadata["ledger"] and len(b.metadata["ledger"]) == 1
for name in ("local", "cluster"):
    kinds = [e["kind"] for e in Ledger(f"/output/{name}-ledger.sqlite").events()]
    assert kinds == ["reserve", "release"], (name, kinds)
'
in_image "$IMAGE" python -c "$compare" || die "the releases differ (outputs: $WORK/output)"
say "image check passed ($IMAGE; logs and outputs in $WORK)"
