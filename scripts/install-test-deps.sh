#!/usr/bin/env bash
# Installs the system programs the test suite needs beyond Node: nginx, for the replica
# integration test (test/replicas.test.ts). Runs before `npm test` (the "pretest" script).
# Never fails the run itself: when nginx cannot be installed it says so loudly, and the
# replica test then fails with the reason.
set -u
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then exit 0; fi
echo "install-test-deps: nginx is missing; installing it with apt-get (needed by the replica test)" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "install-test-deps: ERROR: not root and no passwordless sudo: install nginx yourself (apt-get install -y nginx)" >&2
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: ERROR: no apt-get on this machine: install nginx with the system package manager" >&2
  exit 0
fi
# Install only: the package's service is not started (tests run their own nginx).
export DEBIAN_FRONTEND=noninteractive RUNLEVEL=1
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends nginx >/dev/null; }; then
  echo "install-test-deps: ERROR: apt-get install nginx failed (see above)" >&2
  exit 0
fi
echo "install-test-deps: nginx installed: $( (command -v nginx || echo /usr/sbin/nginx) )" >&2
