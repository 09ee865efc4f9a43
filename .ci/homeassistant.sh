#!/usr/bin/env bash
# A real Home Assistant for the integration tests (tests/it/homeassistant.rs): the `homeassistant`
# package from PyPI, pinned, in a venv under the target directory, with everything it loads at
# start installed up front, so the tests run it with --skip-pip and it never reaches the network.
#
#   .ci/homeassistant.sh          install if missing (or if the pins changed); print the `hass` path
#
# Python: Home Assistant 2025.4 needs 3.13. Found as $HOMEASSISTANT_PYTHON, `python3.13` on PATH,
# or pyenv's 3.13 ($PYENV_ROOT or ~/.pyenv: the CI image has it there, but a non-interactive shell
# has no pyenv on PATH).
#
# Installed with uv (a dependency of Home Assistant itself, pinned to its version): parallel
# downloads and builds. Five packages have no cp313 wheel on PyPI and are compiled (lru-dict,
# ciso8601, pymicro-vad, pyspeex-noise, and pure-Python pyric/fnvhash/pyturbojpeg wheels built from
# sdists); uv's cache sits next to the venv so that a change of pins reuses them.
#
# Pins: homeassistant 2025.4.4 (the version issue 34 was found with; the newest for Python 3.13.0:
# later ones need 3.13.2), the frontend its `frontend` integration requires, paho-mqtt for `mqtt`,
# pyotp and PyQRCode for the auth modules it loads at start (what 2025.4.4 installed by itself
# on a first start with pip allowed).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
venv=$target_dir/homeassistant-venv
uv_cache=$target_dir/homeassistant-uv-cache
uv_version=0.6.10
packages=(
    homeassistant==2025.4.4
    home-assistant-frontend==20250411.0
    paho-mqtt==2.1.0
    pyotp==2.8.0
    PyQRCode==1.2.1
)
stamp="python3.13 uv==$uv_version ${packages[*]}"

find_python() {
    local candidate
    for candidate in "${HOMEASSISTANT_PYTHON:-}" "$(command -v python3.13 || true)" \
        "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13; do
        if [[ -n $candidate && -x $candidate ]] &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "error: no Python 3.13 (set HOMEASSISTANT_PYTHON, or: pyenv install 3.13)" >&2
    return 1
}

if [[ ! -x $venv/bin/hass || "$(cat "$venv/.pins" 2>/dev/null)" != "$stamp" ]]; then
    python=$(find_python)
    echo "installing ${packages[*]} into $venv (Python: $python)" >&2
    started=$(date +%s)
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "uv==$uv_version" >&2
    UV_CACHE_DIR=$uv_cache "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" "${packages[@]}" >&2
    echo "$stamp" >"$venv/.pins"
    echo "installed Home Assistant in $(($(date +%s) - started)) s" >&2
fi
echo "$venv/bin/hass"
