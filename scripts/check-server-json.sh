#!/usr/bin/env bash
# Checks server.json, the MCP registry listing (part of `make lint`): valid against the vendored
# registry schema (spec/schemas/registry/server.schema.json, 2025-12-11: the newest released),
# with the $schema URL of that file, and at the crate's version: server.json's "version" and
# its OCI image tag must equal [workspace.package] version in Cargo.toml. No network once the
# venv (tests/registry/.venv, jsonschema pinned in tests/registry/requirements.txt) exists.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="$ROOT/tests/registry"
VENV="$DIR/.venv"
# shellcheck source=lib/test_deps.sh
source "$ROOT/scripts/lib/test_deps.sh"
py_venv "$DIR"
exec "$VENV/bin/python" - "$ROOT" <<'PY'
import json, pathlib, sys, tomllib
import jsonschema

root = pathlib.Path(sys.argv[1])
schema = json.loads((root / "spec/schemas/registry/server.schema.json").read_text())
server = json.loads((root / "server.json").read_text())
errors = []
validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
for e in sorted(validator.iter_errors(server), key=lambda e: list(e.absolute_path)):
    errors.append(f"server.json at /{'/'.join(map(str, e.absolute_path))}: {e.message}")
if server.get("$schema") != schema["$id"]:
    errors.append(f"server.json's $schema is {server.get('$schema')!r}, the vendored schema is {schema['$id']!r}")
version = tomllib.loads((root / "Cargo.toml").read_text())["workspace"]["package"]["version"]
if server.get("version") != version:
    errors.append(f"server.json's version is {server.get('version')!r}, Cargo.toml's is {version!r}")
for p in server.get("packages", []):
    if p.get("registryType") == "oci" and not p.get("identifier", "").endswith(f":{version}"):
        errors.append(f"the OCI package {p.get('identifier')!r} is not tagged :{version}")
if errors:
    print("check-server-json: FAIL:\n  " + "\n  ".join(errors), file=sys.stderr)
    sys.exit(1)
print(f"check-server-json: server.json is valid ({schema['$id']}) at version {version}")
PY
