# shellcheck shell=bash
# Helpers and constants shared by the scripts (setup, reference, fuzz, demo, check-packaging; sourced, not run).

log() { printf '[%s] %s\n' "${JB_SCRIPT:-jitbridge}" "$*"; }
warn() { printf '[%s] warning: %s\n' "${JB_SCRIPT:-jitbridge}" "$*" >&2; }
die() { printf '[%s] error: %s\n' "${JB_SCRIPT:-jitbridge}" "$*" >&2; exit 1; }

# The pybind11 python/jitbridge/_core.pyi was generated with: scripts/setup installs it where pybind11 is missing,
# scripts/reference --check compares the stub only against a build made with it (the stub's text follows pybind11's).
JB_PYBIND11_VERSION=3.1.0
# The CPU JAX that scripts/check-jax tests jitbridge.jax with and scripts/reference documents it with (Python 3.11+).
JB_JAX_VERSION=0.10.2

# Run a command as root: directly when we are root, else through sudo (non-interactive
# when there is no terminal, as in CI, so it fails instead of waiting for a password).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    if [ -t 0 ]; then sudo "$@"; else sudo -n "$@"; fi
  else
    die "need root for: $* (not root, and no sudo)"
  fi
}

deb_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# apt_install_missing PKG...: installs those of PKG not installed yet; runs apt-get update only
# when something is missing. Does nothing (with a warning) on a system without dpkg/apt-get.
apt_install_missing() {
  local missing=() p
  if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    warn "no dpkg/apt-get here; not installing Debian packages: $*"
    return 0
  fi
  for p in "$@"; do deb_installed "$p" || missing+=("$p"); done
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "apt: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# jb_python: sets and exports PYTHON, the interpreter the scripts build for and pip-install into (setup, demo,
# test). PYTHON when set is used as given (no venv). Otherwise the one project venv, $JITBRIDGE_VENV (default
# <repo>/.venv), shared by scripts/demo and scripts/test and made by whichever runs first, with `python3 -m venv`
# from the python3 first on PATH; Debian's python3 without the venv module gets python3-venv through apt, and
# only then. A stock system Python (PEP 668: pip refuses to install into it) and a venv, conda or pyenv Python
# all work the same way. An activated venv or conda environment is not installed into (the project venv is made
# from its python3); PYTHON=python names it instead. Needs ROOT.
jb_python() {
  if [ -n "${PYTHON:-}" ]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON not found"
    export PYTHON
    return 0
  fi
  local venv=${JITBRIDGE_VENV:-$ROOT/.venv} active=${VIRTUAL_ENV:-${CONDA_PREFIX:-}}
  if [ ! -x "$venv/bin/python" ]; then
    command -v python3 >/dev/null 2>&1 || die "no python3 on PATH: install Python 3.9+ (apt-get install python3), or set PYTHON"
    log "creating the project venv ${venv#"$ROOT"/} (python3 -m venv, from $(command -v python3), Python $(python3 -c 'import platform; print(platform.python_version())'))"
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
      # Debian/Ubuntu's python3 has no ensurepip without python3-venv.
      rm -rf "$venv"
      apt_install_missing python3-venv
      python3 -m venv "$venv" || die "python3 -m venv $venv failed"
    fi
  fi
  "$venv/bin/python" -c 'import sys' >/dev/null 2>&1 \
    || die "the project venv $venv does not run (made by a Python that has moved?): remove it and run again"
  if [ -n "$active" ] && [ "$(cd "$active" 2>/dev/null && pwd -P)" != "$(cd "$venv" && pwd -P)" ]; then
    log "note: the active environment $active is not installed into; using the project venv ${venv#"$ROOT"/} (PYTHON=python uses the active one)"
  fi
  PYTHON=$venv/bin/python
  export PYTHON
}

# jb_externally_managed PY: true when pip refuses to install into PY's environment (PEP 668: a system Python).
jb_externally_managed() {
  "$1" -c 'import os, sys, sysconfig
sys.exit(0 if sys.prefix == sys.base_prefix and os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)' \
    >/dev/null 2>&1
}
