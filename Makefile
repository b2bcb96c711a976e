# runloopd — the two commands that matter: `make run` and `make test`.
SWIFT ?= swift
PORT ?= 8080
HOST ?= 127.0.0.1
RELEASE_FLAGS := -c release --static-swift-stdlib
BIN_DEBUG := .build/debug/runloopd
BIN_RELEASE := .build/release/runloopd
# The tests that compare a real run's timing with its prediction, and the plain-CF
# cases of docs/claims.md (on a slot grid too): run apart from the rest.
PREDICT_TESTS := PredictDifferentialTests|E2EPredictTests|ClaimOracleTests
# What swift format lints and formats (make test, make lint, make format).
FORMAT_PATHS := Sources Tests Plugins Package.swift benchmarks/Sources benchmarks/Package.swift

.PHONY: run deps build release test test-upgrade test-swift test-predict test-tsan test-browser test-prometheus test-container lint format clean bench test-lab-pace

deps:
	@bash scripts/install-deps.sh

# The version (RunLoopService.version) and the commit `runloopd --version` prints with it:
# git's HEAD (12 digits, -dirty with uncommitted changes); the Dockerfile passes COMMIT=.
VERSION := $(shell sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/RunLoopServer/RunLoopService.swift)
COMMIT ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null && echo $$c || echo $$c-dirty; })
DIST := .build/dist
RELEASE_NAME := runloopd-$(VERSION)-linux-$(shell uname -m)

## The release: the binary built with its commit (the same build the Dockerfile runs),
## stripped into $(DIST)/$(RELEASE_NAME), with its SHA-256 checksum beside it
## ($(RELEASE_NAME).sha256: `sha256sum -c` checks it). CHANGELOG.md says what changed.
release: deps
	RUNLOOPD_COMMIT=$(COMMIT) $(SWIFT) build $(RELEASE_FLAGS)
	@mkdir -p $(DIST)
	strip -o $(DIST)/$(RELEASE_NAME) $(BIN_RELEASE)
	cd $(DIST) && sha256sum $(RELEASE_NAME) > $(RELEASE_NAME).sha256
	@cat $(DIST)/$(RELEASE_NAME).sha256
	@$(DIST)/$(RELEASE_NAME) --version

build: deps
	$(SWIFT) build

## Run the service on http://$(HOST):$(PORT)/ (dashboard at /, API at /api).
run: release
	$(BIN_RELEASE) --host $(HOST) --port $(PORT) --public-dir Public

## Every test: Swift unit + end-to-end tests (with a real PostgreSQL of their own,
## scripts/with-postgres.sh), then the predictor's tests that compare a run's timing
## with its prediction on their own (1,000 generated loops, and predict vs run over HTTP), every experiment played, browser tests, Debian's
## Prometheus against two instances with the shipped alert rules and dashboard, format lint.
test: deps
	@bash scripts/install-deps.sh test
	$(SWIFT) build --build-tests
	bash scripts/with-postgres.sh $(SWIFT) test --skip-build --skip '$(PREDICT_TESTS)'
	$(SWIFT) test --skip-build --filter '$(PREDICT_TESTS)'
	@mkdir -p .build/artifacts
	$(BIN_DEBUG) play experiments/ --quiet --junit .build/artifacts/experiments-junit.xml
	bash Tests/browser/run.sh $(BIN_DEBUG)
	bash Tests/prometheus/run.sh $(BIN_DEBUG)
	$(SWIFT) format lint --strict --recursive $(FORMAT_PATHS)

test-swift: deps
	$(SWIFT) build --build-tests
	bash scripts/with-postgres.sh $(SWIFT) test --skip-build

## The predictor's differential test over 10,000 generated loops (make test
## plays 1,000): PREDICT_SEED=s replays a run (with PREDICT_SETUPS=1, one setup;
## with PREDICT_REPEAT=n, that one setup n times, e.g. to stress it under load).
test-predict: deps
	$(SWIFT) build --build-tests
	PREDICT_SETUPS=$${PREDICT_SETUPS:-10000} $(SWIFT) test --skip-build --filter PredictDifferentialTests

## ThreadSanitizer over the Swift suite (its own build folder, .build-tsan);
## any report fails. About 2 minutes.
test-tsan: deps
	SWIFT=$(SWIFT) PREDICT_TESTS='$(PREDICT_TESTS)' bash scripts/test-tsan.sh

test-browser: build
	@bash scripts/install-deps.sh test
	bash Tests/browser/run.sh $(BIN_DEBUG)

## Debian's prometheus + promtool (Tests/prometheus): promtool checks and unit-tests
## deploy/prometheus/runloopd-alerts.yml; a live Prometheus scrapes two runloopd on one
## PostgreSQL through a PostgreSQL outage, a refusal burst and a kill -9 (exactly which
## alerts fire, none after recovery), and evaluates every query of
## deploy/grafana/runloopd-dashboard.json. About 110 s.
test-prometheus: build
	@bash scripts/install-deps.sh test
	bash Tests/prometheus/run.sh $(BIN_DEBUG)

## A mixed-version fleet on one PostgreSQL (Tests/upgrade, issue 40): the previous
## release's runloopd (RUNLOOPD_PREVIOUS, default 1a429af), built from git into
## .build/previous/, and this one, upgraded and rolled back instance by instance; every
## answered perform is kept. A few minutes the first time (the build), ~30 s after.
test-upgrade: build
	bash Tests/upgrade/run.sh $(BIN_DEBUG)

## Prove the Dockerfile's runtime stage without Docker: release build, a
## debootstrap'd bookworm root with only the runtime packages, the binary run
## inside it (chroot) as the non-root user. Needs root. About 2-8 minutes.
test-container: deps
	bash scripts/test-container.sh

lint:
	$(SWIFT) format lint --strict --recursive $(FORMAT_PATHS)
	python3 scripts/source-sizes.py
	python3 scripts/js-cycles.py
	python3 scripts/model-imports.py

format:
	$(SWIFT) format --in-place --recursive $(FORMAT_PATHS)

clean:
	rm -rf .build

## Benchmarks of issue 6 (release builds, own package in benchmarks/): prints
## PASS/FAIL per goal and rewrites BENCHMARKS.md. About 6-8 minutes.
bench: deps
	bash benchmarks/run.sh

## Experiments at a learner's pace (issue 39): every experiment played by
## `runloopd play --pace 3` (9 at a time), then stepped in the dashboard (headless Chromium,
## 4 pages) with a 3 s pause before each Step and each guess, Guess first on;
## every step must pass. Long (~10 min), so not in `make test`; CI runs it.
test-lab-pace: build
	@bash scripts/install-deps.sh test
	printf '%s\n' experiments/*.json | xargs -P 9 -I{} $(BIN_DEBUG) play {} --quiet --pace $${LAB_PACE_SECONDS:-3}
	LAB_PACE_SECONDS=$${LAB_PACE_SECONDS:-3} bash Tests/browser/run.sh $(BIN_DEBUG) -k learners_pace

## Hardening of issue 7 (Tests/hardening): schemathesis fuzzing, protocol abuse,
## slowloris + a 10,000-connection flood, faults in loops, churn, SIGTERM under
## load, then LeakSanitizer on the core tests and a sanitized server. ~9 min.
test-hardening: deps
	$(SWIFT) build
	bash Tests/hardening/run.sh $(BIN_DEBUG)
	bash Tests/hardening/leaks.sh
