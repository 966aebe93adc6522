# Targets follow kubebuilder's conventions: install, run, test, demo.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
CLUSTER := python3 hack/cluster/cluster.py
LOCAL_KUBECONFIG := $(CURDIR)/.cluster/kubeconfig

.PHONY: help
help: ## Show the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: venv
venv: ## A venv with the package and its test and lint tools (no Go, no apt-get).
	@bash hack/venv.sh

.PHONY: deps
deps: ## For the local cluster, demo and tests: the venv, Debian packages (openssl, systemd, faketime; root), kubectl built to match (Go >= 1.24).
	@bash hack/deps.sh

.PHONY: cluster-build
cluster-build: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (cached; needs Go >= 1.24).
	@bash hack/cluster/build.sh >/dev/null

.PHONY: tools
tools: deps ## Build promtool and prometheus (cached) into .venv/bin, for the alert and dashboard tests (needs deps, and Go >= 1.26).
	@bin="$$(bash hack/tools/build.sh)" && ln -sfn "$$bin/promtool" "$$bin/prometheus" $(BIN)/

.PHONY: helm
helm: deps ## Build helm (cached) into .venv/bin, for the chart in dist/chart (needs deps: Go, and root for apt-get).
	@bin="$$(bash hack/tools/helm.sh)" && ln -sfn "$$bin/helm" $(BIN)/

REAL_NODE ?=

.PHONY: node-build
node-build: ## What the real node runs: containerd, runc and the CNI plugins from Debian (root), and the kubelet built to match (cached; needs Go).
	@if [[ $$(id -u) == 0 ]]; then bash hack/cluster/node-deps.sh && bash hack/cluster/build.sh kubelet >/dev/null; fi

.PHONY: cluster-up
cluster-up: deps cluster-build $(if $(filter 1,$(REAL_NODE)),node-build) ## Start the local control plane on loopback (.cluster/kubeconfig; needs deps: Go, and root for apt-get). REAL_NODE=1 adds a real kubelet node, real-0 (root).
	@REAL_NODE=$(REAL_NODE) $(CLUSTER) up

.PHONY: cluster-fleet-up
cluster-fleet-up: deps cluster-build ## Two control planes side by side, one kubeconfig with contexts local and local-2 (.cluster-fleet/kubeconfig; needs deps: Go, and root for apt-get).
	@$(CLUSTER) fleet-up

.PHONY: cluster-down
cluster-down: ## Stop the local control planes (both of cluster-fleet-up) and the real node; leaves no process behind.
	@$(CLUSTER) fleet-down

.PHONY: docker-build docker-push
docker-build: ## Build the image IMG with docker, else podman, else buildah (BASE= replaces python:3.11-slim).
	@IMG=$(IMG) BASE=$(BASE) bash hack/image.sh build

docker-push: ## Push the image IMG with the same builder.
	@IMG=$(IMG) bash hack/image.sh push

.PHONY: image-deps
image-deps: ## podman, buildah, runc and mmdebstrap from Debian, for the image tests (root only).
	@bash hack/image/deps.sh

# install, uninstall, deploy and undeploy need kubectl and nothing else: the
# machine's own, or the local cluster's, which `make deps` links into .venv/bin
# (first on PATH). Without one they stop on a single line that says so.
KUBECTL_MISSING = make $@: kubectl not found on PATH; install it from \
  https://kubernetes.io/docs/tasks/tools/ (or run `make deps` for the local cluster's own)
need-kubectl = $(if $(shell PATH='$(PATH)' command -v kubectl),,$(error $(KUBECTL_MISSING)))

.PHONY: install
install: ## Apply the CRDs to the current kubeconfig's cluster (needs kubectl only).
	$(need-kubectl)
	kubectl apply -f crds/

.PHONY: uninstall
uninstall: ## Delete the CRDs (and every Redis and Xca) from the current cluster (needs kubectl only).
	$(need-kubectl)
	kubectl delete --ignore-not-found -f crds/

OVERLAY ?= config/daemon
IMG ?=
BASE ?=

.PHONY: deploy
deploy: ## Apply OVERLAY (config/daemon or config/cronjob) to the current cluster, its image set to IMG (needs kubectl only).
	$(need-kubectl)
	@OVERLAY=$(OVERLAY) IMG=$(IMG) bash hack/deploy.sh deploy

.PHONY: undeploy
undeploy: ## Delete what deploy applied, except the CRDs and so the Redis and Xca objects (needs kubectl only).
	$(need-kubectl)
	@OVERLAY=$(OVERLAY) IMG=$(IMG) bash hack/deploy.sh undeploy

.PHONY: run
run: venv ## Run the daemon against the current kubeconfig (needs Python 3.11+ for the venv; no kubectl, Go or apt-get).
	reconciler run

.PHONY: sync
sync: venv ## Run one pass against the current kubeconfig (needs Python 3.11+ for the venv; no kubectl, Go or apt-get).
	reconciler sync

.PHONY: lint
lint: venv ## ruff, mypy (strict) and import-linter (the layers in docs/architecture.md).
	ruff check reconciler tests hack bench
	ruff format --check reconciler tests hack bench
	mypy reconciler
	mypy tests/unit/fakes.py  # the unit tests' fake, against the client's Protocol
	lint-imports

.PHONY: test-unit
test-unit: venv ## Unit tests only (no cluster, no Go, no apt-get).
	python -m pytest tests/unit tests/bench tests/hack -q -n 2 --durations=10

.PHONY: test-e2e
test-e2e: deps cluster-build node-build tools image-deps helm ## End-to-end tests on a cluster with the real node: side by side on E2E_WORKERS, then the serial ones; the 20 slowest (needs deps: Go, and root for apt-get).
	REAL_NODE=1 python -m hack.e2e $(E2E_ARGS)

.PHONY: test
test: deps cluster-build node-build tools image-deps helm ## Lint, then unit tests, then e2e (builds or reuses the local cluster, with the real node; needs deps: Go, and root for apt-get).
	$(MAKE) --no-print-directory lint
	REQUIRE_SYSTEM_TOOLS=1 python -m pytest tests/unit tests/bench tests/hack -q -n 2 --durations=10
	REQUIRE_SYSTEM_TOOLS=1 REAL_NODE=1 python -m hack.e2e

# mutmut >= 3.6's mypy filter stops on its own wrappers (hack/mutate.py says why).
MUTATE_ARGS ?= --no-type-check

.PHONY: mutate
mutate: ## Mutation testing of the planner, kinds, apply and model (slow; not in `make test`).
	@EXTRAS=test,mutate bash hack/venv.sh
	python hack/mutate.py $(MUTATE_ARGS)

.PHONY: bench
bench: deps cluster-build ## Cost per pass vs the write limit and kopf; then the daemon vs controller-runtime, with verdicts (needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.run $(BENCH_ARGS)
	python -m bench.operators $(OPERATORS_ARGS)

.PHONY: bench-operators bench-lists bench-scale
bench-operators: deps cluster-build ## reconciler run (interval 30, 5) vs controller-runtime and kopf at N=200,1000 (needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.operators $(BENCH_ARGS)

bench-lists: deps cluster-build ## One pod LIST by decoder, gzip, page size, scope and protobuf (6000 pods; needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.lists $(BENCH_ARGS)

bench-scale: deps cluster-build ## Steady pass at 1,000 and 10,000 Redis (3 pods each) + Xca, against commits 3af3b99 and 9a5a83a (needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.scale $(BENCH_ARGS)

.PHONY: bench-storage
bench-storage: deps cluster-build ## Steady pass at 10,000 Redis without, then with spec.storage (30,000 claims), in one run (needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.storage $(BENCH_ARGS)

.PHONY: bench-fleet
bench-fleet: deps cluster-build ## One reconciler run over two clusters of 1,000 Redis and 1,000 Xca each vs a process per cluster: RSS, steady CPU, end state (needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.fleet $(BENCH_ARGS)

.PHONY: bench-pace
bench-pace: deps cluster-build ## Every pod of 1,000 Redis rolled by each --pace-budget and by the pace before it: wall, passes, CPU (needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.pace $(BENCH_ARGS)

.PHONY: bench-foreign
bench-foreign: deps cluster-build ## 300 Redis, then 10,000 unrelated pods: what they cost a steady pass, today and before the labelled LIST (needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.foreign $(BENCH_ARGS)

.PHONY: bench-shard
bench-shard: deps cluster-build ## One sharded replica against three at 10,000 Redis (30,000 pods) and 10,000 Xca; a killed replica's takeover (needs deps: Go, and root for apt-get).
	pip install -q --disable-pip-version-check -e '.[bench]'
	python -m bench.shard $(BENCH_ARGS)

.PHONY: demo
demo: cluster-up ## Local cluster, samples applied, reconcile passes, pods Running (needs what cluster-up does).
	@bash hack/demo.sh

.PHONY: clean
clean: cluster-down ## Stop the cluster and remove .cluster and .venv.
	rm -rf .cluster $(VENV)
