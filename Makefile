# vidforge: the two commands a new user needs are `make serve` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
# Tests run the wgpu path on Mesa lavapipe and fail (not skip) when no adapter is found.
TEST_ENV := WGPU_BACKEND=vulkan VIDFORGE_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp RUST_LOG=warn

.PHONY: deps build serve test lint fmt bench

deps:
	./scripts/install-deps.sh

build: deps
	$(CARGO) build --release --bin vidforge

serve: build
	./target/release/vidforge serve

test: deps
	$(CARGO) build --workspace --all-targets
	$(TEST_ENV) $(CARGO) test --workspace --no-fail-fast -- --test-threads=2
	# Official SDK clients (Python fallback path, TypeScript task path) against a fresh server.
	./scripts/run-clients.sh
	# The pinned official conformance suite, against conformance/expected-failures.yml.
	./scripts/run-conformance.sh
	# The benchmark in quick mode proves it runs (it measures; it asserts nothing about speed).
	./target/debug/vidforge bench --quick --out "$$(mktemp -d)"

# The full benchmark (release build), side by side with the ffmpeg CLI; see README.
bench: build
	./target/release/vidforge bench --out bench-report

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	# Docs that cannot rot: broken intra-doc links and other rustdoc warnings fail the lint.
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace

fmt:
	$(CARGO) fmt --all
