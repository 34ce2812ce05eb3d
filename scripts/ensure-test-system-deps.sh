#!/usr/bin/env bash
# System packages some tests need (headless Chromium for browser tests, PostgreSQL for the
# store-on-PostgreSQL test, bubblewrap for the python graders' sandbox). Installed from Debian's
# packages when missing and we are root; otherwise the browser and PostgreSQL tests are skipped
# with a message saying so, and the sandbox tests fail (tests/test_grader_isolation.py: they check
# the isolation users are promised).
set -u
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
[ -x /usr/lib/postgresql/15/bin/postgres ] || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing system packages for tests: ${need[*]}"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}") >/tmp/ragmeter-apt.log 2>&1 \
      || { echo "warning: could not install ${need[*]} (see /tmp/ragmeter-apt.log); tests needing them will be skipped (the sandbox tests fail without bubblewrap)"; }
  else
    echo "note: ${need[*]} missing and not root; tests needing them will be skipped (the sandbox tests fail without bubblewrap: apt-get install bubblewrap)"
  fi
fi
exit 0
