#!/bin/sh
# Records the event files of t2802 from a run on ksim (after a build; run from
# anywhere), as t2801's script does. The At is scheduled at 10:10; the
# reconciles by hand run with --now 10:05 (PENDING) and then 10:10 (due).
set -e
F=$(cd "$(dirname "$0")" && pwd)
PROJECT_ROOT=$(cd "$F/../.." && pwd)
PATH="$PROJECT_ROOT/bin:$PATH"
P="$PROJECT_ROOT/pipeline/at"
. "$F/../lib-examples.sh"
W=$(mktemp -d)
cd "$W"
ksim --port 0 --kubeconfig "$W/kc" 2>"$W/ksim.log" &
KSIM=$!
trap 'kill $KSIM; rm -rf "$W"' EXIT
i=0; while ! test -s "$W/kc"; do sleep 0.1; i=$((i + 1)); test $i -lt 100; done
KUBECONFIG="$W/kc"
export KUBECONFIG
SERVER=$(sed -n 's/.*"server": *"\([^"]*\)".*/\1/p' "$KUBECONFIG")

wait_for () { i=0; while ! "$@"; do sleep 0.2; i=$((i + 1)); test $i -lt 100; done; }
pod_phase () {
	example_get "/api/v1/namespaces/default/pods/$1" pod.json &&
	test "$(jq -r .status.phase pod.json)" = "$2"
}
at () {
	kapply -f - >/dev/null <<-EOT
	{"apiVersion":"at.example.com/v1alpha1","kind":"At","metadata":{"name":"$1","namespace":"default"},"spec":{"schedule":"$2","command":"$3"}}
	EOT
}

kapply -f "$PROJECT_ROOT/deploy/examples/at/crd.yaml" >/dev/null
at example-at 2026-11-22T10:10:00Z "echo YAY"
example_snapshot "$P" "$F/01-new.in.jsonl"
example_step "$P" "$F/01-new.in.jsonl" 2026-11-22T10:05:00Z
example_snapshot "$P" "$F/02-pending.in.jsonl"
example_step "$P" "$F/02-pending.in.jsonl" 2026-11-22T10:10:00Z
example_snapshot "$P" "$F/03-running.in.jsonl"
wait_for pod_phase example-at Succeeded
example_snapshot "$P" "$F/04-finished.in.jsonl"
example_step "$P" "$F/04-finished.in.jsonl" 2026-11-22T10:10:00Z
example_snapshot "$P" "$F/05-done.in.jsonl"
at bad-at tomorrow "echo no"
example_snapshot "$P" "$F/06-invalid.in.jsonl"
example_step "$P" "$F/06-invalid.in.jsonl" 2026-11-22T10:10:00Z
at bad-at 2026-11-22T10:09:00Z "echo no"
example_snapshot "$P" "$F/07-fixed.in.jsonl"
example_step "$P" "$F/07-fixed.in.jsonl" 2026-11-22T10:10:00Z
wait_for pod_phase bad-at Succeeded

# 08: the At example-at deleted while kwatch records; its pod goes with it
# shellcheck disable=SC2046
kwatch --record "$F/08-deleted.in.jsonl" $(example_watch_args "$P") >/dev/null &
KW=$!
: >"$F/08-deleted.in.jsonl"
wait_for grep -q initial-events-end "$F/08-deleted.in.jsonl"
curl -sS -o /dev/null -X DELETE "$SERVER/apis/at.example.com/v1alpha1/namespaces/default/ats/example-at"
gone () { test "$(grep -c '"type":"DELETED"' "$F/08-deleted.in.jsonl")" -ge 2; }
wait_for gone
sleep 0.5
kill $KW
wait $KW || :
