# shellcheck shell=bash
# Shared set-up for scripts/test and scripts/perf: sourced, never run on its own.
#
# Everything here is idempotent and silent when there is nothing to do, so the two Quick-start
# commands print only what they ran. Work that changes the machine (apt-get, starting services)
# happens only when something is missing, and only as root; otherwise it says what is missing.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
# The stamp records which pyproject.toml (by hash) was installed with which extras, so a re-run
# with nothing changed skips pip entirely (pip's own "already satisfied" pass takes seconds).
STAMP="$VENV/.store-installed"
APT_UPDATED=0

say() { printf '%s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }
is_root() { [ "$(id -u)" = 0 ]; }

# --- Python and the virtualenv -------------------------------------------------------------

pick_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.11 python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            printf '%s\n' "$candidate"
            return 0
        fi
    done
    die "Python 3.11 or newer is needed (set PYTHON=/path/to/python3.11)"
}

ensure_venv() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
        return 0
    fi
    local py
    py=$(pick_python)
    # Debian ships venv's pip bootstrap in a separate package.
    if ! "$py" -c 'import ensurepip' 2>/dev/null; then
        apt_install "python3-venv"
    fi
    say "+ $py -m venv .venv"
    "$py" -m venv "$VENV"
}

# ensure_install EXTRAS: `pip install -e .[EXTRAS]` unless the stamp says it is done already and
# the install works (below). An empty EXTRAS is satisfied by any install of this
# pyproject.toml (every extra includes the base package). A stamp is written only for an
# install that works, and a stamped install that stopped working (an interrupted pip, a
# package removed since) is installed again rather than trusted.
ensure_install() {
    local extras=$1 spec=. hash
    [ -n "$extras" ] && spec=".[$extras]"
    # The compiled part is built by the install: a change to any of its C files or its header
    # (store/_speedups*.c, store/_speedups.h: setup.py's sources) installs again.
    hash=$(cat "$ROOT/pyproject.toml" "$ROOT"/store/_speedups*.[ch] | sha256sum | cut -c1-16)
    if [ -f "$STAMP" ] && install_works; then
        if grep -qx "$hash $extras" "$STAMP" || { [ -z "$extras" ] && grep -q "^$hash " "$STAMP"; }; then
            return 0
        fi
    fi
    say "+ pip install -e '$spec'"
    (cd "$ROOT" && "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$spec")
    if ! install_works; then
        # pip leaves a package it thinks installed alone, however damaged (an interrupted
        # install, a file deleted): install everything again, once.
        rm -f "$STAMP"
        say "+ pip install --force-reinstall -e '$spec'"
        (cd "$ROOT" && "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
            --force-reinstall -e "$spec")
        install_works || die "the install into .venv does not work: .venv/bin/store --help says why"
    fi
    printf '%s %s\n' "$hash" "$extras" >>"$STAMP"
}

# install_works: `store` imports from this checkout and its command line builds (every
# subcommand's module imports, so a base dependency missing from the install fails here, not
# in the user's first command), and the `store` script exists.
install_works() {
    local where
    [ -x "$VENV/bin/store" ] || return 1
    # From / so that the checkout's own folder on sys.path cannot stand in for the install.
    where=$(cd / && "$VENV/bin/python" -c '
import os
import store
from store.cli.main import build_parser
build_parser()
print(os.path.dirname(store.__path__[0]))' 2>/dev/null) || return 1
    [ "$where" = "$ROOT" ]
}

# --- Debian packages ------------------------------------------------------------------------

pkg_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

apt_update_once() {
    if [ "$APT_UPDATED" = 0 ]; then
        say "+ apt-get update"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq -o DPkg::Lock::Timeout=300 >/dev/null
        APT_UPDATED=1
    fi
}

# pkg_available NAME: the package has an installation candidate in the current lists.
pkg_available() {
    local candidate
    candidate=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

# first_available NAME...: the first name with a candidate (package names differ between Debian
# releases: libaio1 became libaio1t64, openjdk-17 left trixie).
first_available() {
    local name
    for name in "$@"; do
        if pkg_available "$name"; then
            printf '%s\n' "$name"
            return 0
        fi
    done
    return 1
}

# apt_install ALTERNATIVES...: each argument is one need, spelled "name1|name2|..." (any one
# installed satisfies it). Installs what is missing, as root; otherwise says what is missing.
apt_install() {
    local need name missing=() chosen=() found
    for need in "$@"; do
        found=0
        for name in ${need//|/ }; do
            if pkg_installed "$name"; then found=1; break; fi
        done
        [ "$found" = 1 ] || missing+=("$need")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    if ! is_root || ! command -v apt-get >/dev/null 2>&1; then
        say "warning: missing Debian packages (install them as root): ${missing[*]}"
        return 0
    fi
    apt_update_once
    for need in "${missing[@]}"; do
        # shellcheck disable=SC2086  # word-splitting the alternatives is the point
        name=$(first_available ${need//|/ }) || die "no Debian package found for: $need"
        chosen+=("$name")
    done
    say "+ apt-get install -y ${chosen[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o DPkg::Lock::Timeout=300 "${chosen[@]}" >/dev/null
}
