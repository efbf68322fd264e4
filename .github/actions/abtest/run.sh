#!/usr/bin/env bash
# The abtest GitHub Action's step: run the fixture A vs B, write the report to the job summary,
# post or update one pull-request comment, and exit with the gate's code (0 PASS, 1 FAIL,
# 3 INCOMPLETE; 2 for bad input). A comment that cannot be posted (e.g. a fork's read-only
# token) is a warning, never the job's result: the gate decides.
set -uo pipefail

cd "${INPUT_WORKING_DIRECTORY:-.}" || exit 2
if [ "${ABTEST_SKIP_INSTALL:-}" != "1" ]; then
  spec="${INPUT_INSTALL:-}"
  [ -n "$spec" ] || spec="${GITHUB_ACTION_PATH:?}/../../.."   # abtest at this action's commit
  python -m pip install --quiet "$spec" || { echo "::error::pip install $spec failed"; exit 2; }
fi
cfg=(--config "${INPUT_CONFIG:-abtest.yaml}")
tmp="${RUNNER_TEMP:-$(mktemp -d)}"

out="$(abtest "${cfg[@]}" run --fixture "${INPUT_FIXTURE:?}" --a "${INPUT_A:?}" --b "${INPUT_B:?}")"
code=$?
run_id="$(printf '%s\n' "$out" | tail -n 1)"
if [ -z "$run_id" ]; then          # nothing ran: bad input (2) or an internal error (1)
  echo "::error::abtest run exited $code before any run started (see the log above)"
  exit "$code"
fi
[ -n "${GITHUB_OUTPUT:-}" ] && echo "run-id=$run_id" >> "$GITHUB_OUTPUT"

abtest "${cfg[@]}" report "$run_id" --format github --out "$tmp/abtest-comment.md" || exit $?
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  cat "$tmp/abtest-comment.md" >> "$GITHUB_STEP_SUMMARY"
fi
if [ "${INPUT_COMMENT:-true}" = "true" ]; then
  python -m abtest.reporting.pr_comment "$tmp/abtest-comment.md" --key "${INPUT_KEY:-$INPUT_FIXTURE}" \
    || echo "::warning::the pull-request comment was not posted (see above); the gate decides"
fi

abtest "${cfg[@]}" gate "$run_id"
gate=$?
[ -n "${GITHUB_OUTPUT:-}" ] && echo "gate=$gate" >> "$GITHUB_OUTPUT"
exit "$gate"
