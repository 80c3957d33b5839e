#!/usr/bin/env bash
# The course site in a real browser: headless Chromium opens every page of build/docs/html and
# the check fails on any console message or uncaught error, a page that does not load, an image
# or figure that does not show (or a chapter page without its figure), or math left untypeset
# (or typeset as a TeX error) on a page that has formulas. It then takes screenshots of the front page and the 11.5 page. Without Chromium it
# says so and exits 0: the normal build never needs a browser.
#   docs/tests/check_site.sh [HTML_DIR [OUT_DIR]]   (defaults: build/docs/html, build/docs)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
html=$(cd "${1:-$root/build/docs/html}" && pwd)
out=${2:-$root/build/docs}
mkdir -p "$out/screenshots"
out=$(cd "$out" && pwd)

browser=""
for b in chromium chromium-browser google-chrome; do
  command -v "$b" >/dev/null 2>&1 && { browser=$b; break; }
done
if [ -z "$browser" ]; then
  echo "check_site: SKIPPED: no Chromium found; install it (apt-get install chromium) to test the site in a browser"
  exit 0
fi

# A profile of our own: --disable-web-security (which lets the harness read the pages' DOM
# across file:// frames) refuses to run on the user's profile, and nothing is left behind.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
run_browser() {
  # Debian's wrapper script prints a harmless shell complaint on some machines; the rest of its
  # stderr is Chromium's log, which the caller reads for console messages.
  "$browser" --headless --disable-gpu --no-sandbox --no-first-run --user-data-dir="$profile" \
    --enable-logging=stderr --v=0 "$@"
}

# Every page of the site (search/ holds the search box's helper frames, not pages), and which
# of them have formulas: Doxygen writes them as \( \) and \[ \] for MathJax to typeset.
mapfile -t pages < <(cd "$html" && ls -1 -- *.html | sort)
[ ${#pages[@]} -gt 0 ] || { echo "check_site: no pages in $html; run ./mgpu docs first" >&2; exit 1; }
mapfile -t math_pages < <(cd "$html" && grep -l -F -e '\(' -e '\[' -- *.html | sort || true)

# The harness loads the pages four at a time in frames, waits for MathJax to finish each one,
# and writes one line per page into <pre id="results">, which --dump-dom prints.
harness=$out/check_site.html
{
  cat <<'HTML'
<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>site check</title></head><body>
<pre id="results"></pre>
<script>
HTML
  printf 'const base = %s;\nconst pages = [\n' "\"file://$html/\""
  printf '  "%s",\n' "${pages[@]}"
  cat <<'HTML'
];
const results = document.getElementById("results");
function report(page, fields) { results.textContent += page + "\t" + fields.join("\t") + "\n"; }
// One page: loaded, formulas typeset, TeX errors, broken images.
function check(page) {
  return new Promise(resolve => {
    const frame = document.createElement("iframe");
    frame.style.width = "1200px"; frame.style.height = "800px";
    let settled = false;
    const finish = fields => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      report(page, fields);
      frame.remove();
      resolve();
    };
    const timer = setTimeout(() => finish(["timeout"]), 30000);
    frame.onload = () => {
      const win = frame.contentWindow, doc = frame.contentDocument;
      const inspect = async () => {
        const jax = win.MathJax && win.MathJax.Hub ? win.MathJax.Hub.getAllJax() : [];
        const texErrors = jax.filter(j => j.texError).length;  // set by the TeX input on a parse error
        // decode() waits for an image still loading and fails only for one that cannot show; an
        // <img> whose src a script has not set yet is not counted.
        const decoded = await Promise.all(Array.from(doc.images).filter(i => i.getAttribute("src"))
          .map(i => i.decode().then(() => null, () => i.getAttribute("src"))));
        const broken = decoded.filter(src => src !== null);
        // Figures are SVG <object>s; one that failed to load has no SVG document inside.
        const objects = Array.from(doc.querySelectorAll("object"));
        for (const o of objects) {
          const d = o.contentDocument;
          if (!d || !d.documentElement || d.documentElement.nodeName.toLowerCase() !== "svg")
            broken.push(o.getAttribute("data"));
        }
        finish(["loaded", "jax=" + jax.length, "texerrors=" + texErrors, "broken=" + broken.join(","),
                "figures=" + objects.length]);
      };
      if (win.MathJax && win.MathJax.Hub && win.MathJax.Hub.Register)
        win.MathJax.Hub.Register.StartupHook("End", inspect);
      else
        inspect();
    };
    frame.src = base + page;
    document.body.appendChild(frame);
  });
}
(async () => {
  let next = 0;
  const worker = async () => { while (next < pages.length) await check(pages[next++]); };
  await Promise.all([worker(), worker(), worker(), worker()]);
  results.setAttribute("data-done", "yes");
})();
</script>
</body></html>
HTML
} >"$harness"

log=$out/check_site.log
dom=$out/check_site.dom
start=$(date +%s)
run_browser --disable-web-security --allow-file-access-from-files --virtual-time-budget=600000 \
  --dump-dom "file://$harness" >"$dom" 2>"$log" || true

failures=()
grep -q 'data-done="yes"' "$dom" || failures+=("the harness did not finish: see $log")
# Every console line the pages wrote (errors, uncaught exceptions, warnings) is a failure.
while IFS= read -r line; do
  failures+=("console: ${line#*CONSOLE}")
done < <(grep -F ':CONSOLE' "$log" || true)
results=$(sed -n '/<pre id="results"/,/<\/pre>/p' "$dom" | sed 's/<[^>]*>//g')
# The pages that embed a figure drawn by `./mgpu docs`, each required when its figure was drawn
# (on a student build a figure waits for the chapter code it runs).
declare -A figure_of=([md_chapters_11_3_zero_README.html]=plan-70b-zero3.svg
                      [md_chapters_11_5_pipeline_README.html]=pipeline-1f1b.svg
                      [md_chapters_11_6_checkpointing_README.html]=checkpoint-32.svg)
declare -A wants_figure=()
for p in "${!figure_of[@]}"; do
  if [ -f "$out/figures/${figure_of[$p]}" ]; then wants_figure[$p]=1; fi
done
declare -A has_math=()
for p in "${math_pages[@]}"; do has_math[$p]=1; done
typeset_pages=0
for p in "${pages[@]}"; do
  line=$(awk -F'\t' -v p="$p" '$1 == p' <<<"$results")
  if [ -z "$line" ]; then failures+=("$p: never reported"); continue; fi
  IFS=$'\t' read -r _ state jax tex broken figures <<<"$line"
  [ "$state" = loaded ] || { failures+=("$p: $state"); continue; }
  [ "${tex#texerrors=}" = 0 ] || failures+=("$p: ${tex#texerrors=} formulas are TeX errors")
  [ -z "${broken#broken=}" ] || failures+=("$p: images that do not show: ${broken#broken=}")
  if [ -n "${wants_figure[$p]:-}" ] && [ "${figures#figures=}" = 0 ]; then
    failures+=("$p: does not show ${figure_of[$p]}, which ./mgpu docs drew for it")
  fi
  if [ -n "${has_math[$p]:-}" ]; then
    if [ "${jax#jax=}" -gt 0 ]; then typeset_pages=$((typeset_pages + 1)); else
      failures+=("$p: has formulas but MathJax typeset none"); fi
  fi
done

# Screenshots, to look at: the front page and a chapter with formulas and a figure.
for shot in index:front md_chapters_11_5_pipeline_README:11_5_pipeline; do
  page=${shot%%:*} name=${shot#*:}
  [ -f "$html/$page.html" ] || { failures+=("$page.html: missing, no screenshot"); continue; }
  run_browser --hide-scrollbars --window-size=1280,2400 --virtual-time-budget=20000 \
    --screenshot="$out/screenshots/$name.png" "file://$html/$page.html" >>"$log" 2>&1 || true
  [ -s "$out/screenshots/$name.png" ] || failures+=("screenshot of $page.html failed: see $log")
done

echo "check_site: ${#pages[@]} pages opened in $browser in $(( $(date +%s) - start )) s;" \
     "formulas typeset on $typeset_pages of ${#math_pages[@]} pages that have them"
echo "check_site: screenshots in $out/screenshots/ (front.png, 11_5_pipeline.png)"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'check_site: FAIL: %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "check_site: ok"
