#!/usr/bin/env bash
# Screenshot an abtest HTML report with headless Chromium (no network needed: the page
# is self-contained).  Usage: scripts/screenshot_report.sh REPORT.html OUT.png [WIDTH,HEIGHT]
set -euo pipefail

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTH,HEIGHT (default 1200,2400)]" >&2
  exit 2
fi
report=$1
out=$2
size=${3:-1200,2400}
chromium=${CHROMIUM:-/usr/bin/chromium}

if [ ! -f "$report" ]; then
  echo "error: no such report: $report" >&2
  exit 2
fi
if [ ! -x "$chromium" ]; then
  echo "error: $chromium not found (install Debian 'chromium' or set CHROMIUM=...)" >&2
  exit 2
fi

report_abs=$(realpath "$report")
out_abs=$(realpath -m "$out")
mkdir -p "$(dirname "$out_abs")"
profile=$(mktemp -d "${TMPDIR:-/tmp}/abtest-chromium.XXXXXX")
trap 'rm -rf "$profile"' EXIT

"$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --disable-dev-shm-usage --hide-scrollbars --user-data-dir="$profile" \
  --window-size="$size" --screenshot="$out_abs" "$report_abs" \
  >"$profile/chromium.log" 2>&1 || {
    echo "error: chromium failed; its log:" >&2
    cat "$profile/chromium.log" >&2
    exit 1
  }
if [ ! -s "$out_abs" ]; then
  echo "error: chromium wrote no screenshot to $out_abs; its log:" >&2
  cat "$profile/chromium.log" >&2
  exit 1
fi
echo "$out_abs"
