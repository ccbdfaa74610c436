#!/usr/bin/env bash
# Installs the system programs the test suite needs beyond Node. Runs before `npm test`
# (the "pretest" script).
#  - nginx, for the replica integration test (test/replicas.test.ts);
#  - Mesa's lavapipe Vulkan driver (llvmpipe) from bookworm-backports, so the webgpu
#    backend (Dawn, npm package `webgpu`) has an adapter on machines without a GPU
#    (test/webgpu-*.test.ts). Bookworm's own Mesa 22.3 is too old for Dawn; 25.x works.
# Idempotent; never fails the run itself: when something cannot be installed it says so
# loudly, and the test that needs it then fails with the reason.
set -u
log() { echo "install-test-deps: $*" >&2; }

have_nginx() { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; }
# lavapipe registers an ICD manifest named lvp_icd*.json; the version must be ≥ 23.
lavapipe_version() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true; }
have_lavapipe() {
  local v; v="$(lavapipe_version)"
  [ -n "$v" ] && ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 && dpkg --compare-versions "$v" ge 23
}

if have_nginx && have_lavapipe; then exit 0; fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    log "ERROR: not root and no passwordless sudo: install nginx and mesa-vulkan-drivers (>= 23, bookworm-backports) yourself"
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  log "ERROR: no apt-get on this machine: install nginx and Mesa's lavapipe (mesa-vulkan-drivers >= 23) with the system package manager"
  exit 0
fi
# Install only: no service is started (tests run their own nginx).
export DEBIAN_FRONTEND=noninteractive RUNLEVEL=1
UPDATED=0
apt_update() { [ "$UPDATED" = 1 ] || { $SUDO apt-get update -qq && UPDATED=1; }; }

if ! have_nginx; then
  log "nginx is missing; installing it with apt-get (needed by the replica test)"
  if apt_update && $SUDO apt-get install -y -qq --no-install-recommends nginx >/dev/null; then
    log "nginx installed: $( (command -v nginx || echo /usr/sbin/nginx) )"
  else
    log "ERROR: apt-get install nginx failed (see above)"
  fi
fi

if ! have_lavapipe; then
  log "Mesa lavapipe >= 23 is missing (have: '$(lavapipe_version)'); installing mesa-vulkan-drivers from bookworm-backports (needed by the webgpu tests)"
  CODENAME="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
  if [ "$CODENAME" != "bookworm" ]; then
    log "ERROR: this is not Debian bookworm ('$CODENAME'): install mesa-vulkan-drivers >= 23 (lavapipe) yourself"
    exit 0
  fi
  SRC=/etc/apt/sources.list.d/bookworm-backports.sources
  if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      | $SUDO tee "$SRC" >/dev/null || log "ERROR: could not write $SRC"
    UPDATED=0
  fi
  if apt_update && $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports mesa-vulkan-drivers >/dev/null; then
    log "lavapipe installed: mesa-vulkan-drivers $(lavapipe_version)"
  else
    log "ERROR: apt-get install -t bookworm-backports mesa-vulkan-drivers failed (see above)"
  fi
fi
exit 0
