# Sourced by .ci/run and .ci/nightly: `stage NAME COMMAND...` runs one stage, prints its
# elapsed wall time (and the total so far) when it ends, pass or fail, and keeps the line
# for the table printed when the script exits. A failing stage stops the script (set -e).
_CI_T0=$(date +%s)
_CI_TABLE=()

_ci_fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

stage() {
  local name="$1" t0 rc dt
  shift
  t0=$(date +%s)
  echo "::: stage '$name' starts at $(date -u +%H:%M:%S) UTC"
  if "$@"; then rc=0; else rc=$?; fi
  dt=$(($(date +%s) - t0))
  _CI_TABLE+=("$(printf '%-34s %8s%s' "$name" "$(_ci_fmt "$dt")" "$([ "$rc" = 0 ] || echo "  FAILED (exit $rc)")")")
  echo "::: stage '$name': $(_ci_fmt "$dt") (total $(_ci_fmt $(($(date +%s) - _CI_T0))))$([ "$rc" = 0 ] || echo ", FAILED with exit $rc")"
  return "$rc"
}

_ci_summary() {
  local rc=$?
  echo "::: stage times (wall, $(nproc) cores, load at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
  local line
  for line in "${_CI_TABLE[@]}"; do echo ":::   $line"; done
  echo "::: total $(_ci_fmt $(($(date +%s) - _CI_T0)))$([ "$rc" = 0 ] || echo ", exit $rc")"
}
trap _ci_summary EXIT
