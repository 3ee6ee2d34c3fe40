# Sourced by the scripts that need test packages: installs from lockfiles and pinned
# requirements, only when missing or stale, into the folder that uses them. npm and pip keep
# their downloads in one cache per user (~/.npm, ~/.cache/pip), so a second folder that pins the
# same package installs it from there. scripts/install-test-deps.sh runs them all at once.

# node_modules of DIR from its package-lock.json (Node 22 comes from the lockfile's `node`).
npm_install() {
  local dir="$1"
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
  fi
}

# DIR/.venv from DIR/requirements.txt (exact pins); DIR/.venv/.installed marks it complete.
py_venv() {
  local dir="$1"
  if [ ! -f "$dir/.venv/.installed" ] || [ "$dir/requirements.txt" -nt "$dir/.venv/.installed" ]; then
    python3 -m venv "$dir/.venv"
    "$dir/.venv/bin/pip" install --quiet --no-compile --disable-pip-version-check -r "$dir/requirements.txt"
    touch "$dir/.venv/.installed"
  fi
}
