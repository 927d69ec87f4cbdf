# shellcheck shell=bash
# Helpers and constants shared by the scripts (setup, reference, fuzz, demo, check-packaging; sourced, not run).

log() { printf '[%s] %s\n' "${JB_SCRIPT:-jitbridge}" "$*"; }
warn() { printf '[%s] warning: %s\n' "${JB_SCRIPT:-jitbridge}" "$*" >&2; }
die() { printf '[%s] error: %s\n' "${JB_SCRIPT:-jitbridge}" "$*" >&2; exit 1; }

# The pybind11 python/jitbridge/_core.pyi was generated with: scripts/setup installs it where pybind11 is missing,
# scripts/reference --check compares the stub only against a build made with it (the stub's text follows pybind11's).
JB_PYBIND11_VERSION=3.1.0

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
