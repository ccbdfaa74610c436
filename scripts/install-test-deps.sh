#!/usr/bin/env bash
# Installs the system programs the test suite needs beyond Node: nginx, for the replica
# integration test (test/replicas.test.ts), and Debian's chromium, for the web-UI browser
# test (test/webui-browser.test.ts, driven by puppeteer-core at /usr/bin/chromium).
# Runs before `npm test` (the "pretest" script). Idempotent. Never fails the run itself:
# when a program cannot be installed it says so loudly, and the test that needs it then
# fails with the reason.
set -u
MISSING=()
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then MISSING+=(nginx); fi
if [ ! -x /usr/bin/chromium ]; then MISSING+=(chromium); fi
if [ ${#MISSING[@]} -eq 0 ]; then exit 0; fi
echo "install-test-deps: missing ${MISSING[*]}; installing with apt-get (nginx: replica test; chromium: web-UI browser test)" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "install-test-deps: ERROR: not root and no passwordless sudo: install them yourself (apt-get install -y ${MISSING[*]})" >&2
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: ERROR: no apt-get on this machine: install ${MISSING[*]} with the system package manager" >&2
  exit 0
fi
# Install only: no service is started (tests run their own nginx and browser).
export DEBIAN_FRONTEND=noninteractive RUNLEVEL=1
if ! $SUDO apt-get update -qq; then
  echo "install-test-deps: ERROR: apt-get update failed (see above)" >&2
  exit 0
fi
for pkg in "${MISSING[@]}"; do
  if ! $SUDO apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null; then
    echo "install-test-deps: ERROR: apt-get install $pkg failed (see above)" >&2
  else
    echo "install-test-deps: $pkg installed" >&2
  fi
done
exit 0
