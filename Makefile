# vidforge: the two commands a new user needs are `make serve` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
# Tests run the wgpu path on Mesa lavapipe and fail (not skip) when no adapter is found.
TEST_ENV := WGPU_BACKEND=vulkan VIDFORGE_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp RUST_LOG=warn

.PHONY: deps build serve test check first-contact lint fmt bench bench-segments load chaos fuzz cluster cluster-down image

deps:
	./scripts/install-deps.sh

# The binary lives in the server package (`-p vidforge`, the workspace's default member).
build: deps
	$(CARGO) build --release -p vidforge --bin vidforge

# Serves on 127.0.0.1:8080 with data in ./vidforge-data (VIDFORGE_LISTEN, VIDFORGE_DATA_DIR,
# ... or `./target/release/vidforge serve --help` for the rest). Ctrl-C or SIGTERM stops it.
serve: build
	./target/release/vidforge serve

# The OCI image localhost/vidforge:latest (and :VERSION): the release binary with the FFmpeg,
# Vulkan and lavapipe libraries it loads, from Debian's packages (no container registry needed);
# a non-root user, /data as the volume. See docs/deploy.md.
image: build
	./scripts/image.sh

# Three nodes on one PostgreSQL behind an nginx gateway, all on 127.0.0.1, state in
# ./vidforge-cluster: prints the one MCP URL (http://127.0.0.1:8090/mcp) and its bearer token.
# VIDFORGE_NODES, VIDFORGE_CLUSTER_PORT, VIDFORGE_CLUSTER_TOKENS, ... see scripts/cluster.sh.
cluster: build
	./scripts/cluster.sh up

# Stops the gateway, the nodes and PostgreSQL; keeps ./vidforge-cluster (`scripts/cluster.sh
# down --purge` deletes it).
cluster-down:
	./scripts/cluster.sh down

# The inner loop: formatting, lints and every crate's unit tests (no end-to-end tests, no
# server started); seconds when warm. `make test` is the whole suite.
check:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(TEST_ENV) $(CARGO) test --workspace --lib --bins

# Every test against the release build `make serve` uses (one dependency tree): the cargo tests,
# then the script suites (SDK clients, OAuth, cluster, browser UI + Prometheus, container image,
# conformance). Prints the wall time of each phase and test binary. See scripts/test.sh.
test: deps
	./scripts/test.sh

# What CI runs: a bare clone of HEAD, `make serve` and the commands of the README and its docs pages there, then
# `make test` in that clone (see scripts/first-contact.sh). Only committed work is checked.
first-contact:
	./scripts/first-contact.sh --then-test

# The full benchmark (release build), side by side with the ffmpeg CLI; see docs/bench/README.md.
bench: build
	./target/release/vidforge bench --out bench-report

# Segment-parallel rendering (release build): one 60 s 1080p watermarked render on 1, 2 and 3
# nodes pinned to their own cores (taskset) and the single-pass reference, with seam checks on
# every output; some minutes on 2 cores. See docs/bench/segments/README.md.
bench-segments: build
	./scripts/segment-bench.py --nodes 1,2,3 --repeats 1 --out bench-segments

# The MCP front under load (release build): 64 clients poll tasks/get and tools/list for 30 s
# while a 4k render runs; req/s, p50/p99 and the server's peak RSS (docs/reliability.md).
load: build
	./target/release/vidforge load --clients 64 --seconds 30

# Long reliability runs (CI runs the same tests with 10 kill cycles and a few thousand cases):
# 100 `kill -9` cycles against the real binary; 200,000 mutation-fuzz cases. A failing run
# prints its seed: replay it with VIDFORGE_CHAOS_SEED / VIDFORGE_FUZZ_SEED.
chaos: deps
	$(TEST_ENV) VIDFORGE_CHAOS_CYCLES=$${VIDFORGE_CHAOS_CYCLES:-100} $(CARGO) test --release --test e2e chaos:: -- --nocapture

fuzz: deps
	$(TEST_ENV) VIDFORGE_FUZZ_CASES=$${VIDFORGE_FUZZ_CASES:-200000} $(CARGO) test -p vidforge --release --test in_process fuzz:: -- --nocapture

# In the release profile, like `make serve` and `make test`: the check build shares their build
# scripts and proc macros (FFmpeg's bindings are generated once), and rustdoc shares clippy's
# checked dependencies.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	# Docs that cannot rot: broken intra-doc links and other rustdoc warnings fail the lint.
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --release --no-deps --workspace
	# The domain knows no HTTP and no MCP: nothing of axum, hyper, tower or rmcp below it (the
	# workspace-hack only unifies features; the compiler lets a crate use its direct deps alone).
	! $(CARGO) tree -e normal -p vidforge-core --prefix none --prune vidforge-workspace-hack | grep -E '^(axum|hyper|tower|rmcp)'
	@echo "vidforge-core depends on no axum, hyper, tower or rmcp"
	# Nor on a database driver: those are vidforge-store's (core reaches them only through it, so
	# only its direct dependencies are looked at).
	! $(CARGO) tree -e normal -p vidforge-core --depth 1 --prefix none --prune vidforge-workspace-hack | grep -E '^(sled|postgres|tokio-postgres|deadpool-postgres|refinery) '
	@echo "vidforge-core depends directly on no sled, postgres, tokio-postgres, deadpool-postgres or refinery"
	# The MCP front neither: an extension's own tree is vidforge-store's `ExtensionTree`.
	! $(CARGO) tree -e normal -p vidforge-mcp --depth 1 --prefix none --prune vidforge-workspace-hack | grep -E '^sled '
	@echo "vidforge-mcp depends directly on no sled"
	# server.json (the MCP registry listing) against the registry's schema, at the crate's version.
	./scripts/check-server-json.sh

fmt:
	$(CARGO) fmt --all
