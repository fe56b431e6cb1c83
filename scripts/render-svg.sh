#!/bin/sh
# Renders an SVG (loom-bench suite --plot) to PNG with headless Chromium, at the SVG's own size:
#   scripts/render-svg.sh r.svg r.png
# Chromium is not among Loom's dependencies (Debian's `chromium` package brings ~300 MB); this is
# how docs/bench-*.png are made and how tests/tools/check_bench_svg_browser.cmake sees the plot as
# a browser does. CHROMIUM names the browser when it is not `chromium` on the PATH.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: scripts/render-svg.sh IN.svg OUT.png" >&2
  exit 2
fi
in=$1 out=$2
browser=${CHROMIUM:-chromium}
if ! command -v "$browser" >/dev/null 2>&1; then
  echo "render-svg: '$browser' not found (apt-get install chromium, or set CHROMIUM)" >&2
  exit 1
fi
# the width and height of the <svg> element: the screenshot is the whole drawing, no more
size=$(sed -n 's/.*<svg [^>]*width="\([0-9]*\)" height="\([0-9]*\)".*/\1,\2/p' "$in" | head -n 1)
if [ -z "$size" ]; then
  echo "render-svg: $in: no <svg> element with a width and height in pixels" >&2
  exit 1
fi
case $in in /*) url=file://$in ;; *) url=file://$(pwd)/$in ;; esac
# --no-sandbox: Chromium refuses to run as root (CI) with its sandbox on; the page is our own file.
# Chromium's own complaints (no D-Bus in a container) go to a log, not the terminal.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$size" \
  --screenshot="$out" "$url" >"$log" 2>&1 || [ ! -s "$out" ]; then
  cat "$log" >&2
  echo "render-svg: $browser did not render $in" >&2
  exit 1
fi
