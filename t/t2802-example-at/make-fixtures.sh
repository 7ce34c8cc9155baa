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
example_fixtures_ksim

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
example_wait_for pod_phase example-at Succeeded
example_snapshot "$P" "$F/04-finished.in.jsonl"
example_step "$P" "$F/04-finished.in.jsonl" 2026-11-22T10:10:00Z
example_snapshot "$P" "$F/05-done.in.jsonl"
at bad-at tomorrow "echo no"
example_snapshot "$P" "$F/06-invalid.in.jsonl"
example_step "$P" "$F/06-invalid.in.jsonl" 2026-11-22T10:10:00Z
at bad-at 2026-11-22T10:09:00Z "echo no"
example_snapshot "$P" "$F/07-fixed.in.jsonl"
example_step "$P" "$F/07-fixed.in.jsonl" 2026-11-22T10:10:00Z
example_wait_for pod_phase bad-at Succeeded

# 08: the At example-at deleted while kwatch records; its pod goes with it
example_record_deletion "$P" "$F/08-deleted.in.jsonl" /apis/at.example.com/v1alpha1/namespaces/default/ats/example-at 2
