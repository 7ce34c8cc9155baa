#!/bin/sh
# Records the event files of t2803 from a run on ksim (after a build; run from
# anywhere), as t2801's script does: 3 pods, scaled up to 5, then down to 2.
set -e
F=$(cd "$(dirname "$0")" && pwd)
PROJECT_ROOT=$(cd "$F/../.." && pwd)
PATH="$PROJECT_ROOT/bin:$PATH"
P="$PROJECT_ROOT/pipeline/experimental"
NOW=2026-11-22T10:00:00Z
. "$F/../lib-examples.sh"
example_fixtures_ksim

pods () {
	example_get "/api/v1/namespaces/default/pods?labelSelector=app%3Dexample-experimental" pods.json &&
	test "$(jq '[.items[] | select(.status.phase == "Running")] | length' pods.json)" = "$1" &&
	test "$(jq '.items | length' pods.json)" = "$1"
}
replicas () {
	kapply -f - >/dev/null <<-EOT
	{"apiVersion":"experiments.vapourware.com/v1alpha1","kind":"Experimental","metadata":{"name":"example-experimental","namespace":"default"},"spec":{"isPublic":false,"numberOfReplicas":$1}}
	EOT
}

kapply -f "$PROJECT_ROOT/deploy/examples/experimental/crd.yaml" -f "$PROJECT_ROOT/deploy/examples/experimental/example.yaml" >/dev/null
example_snapshot "$P" "$F/01-new.in.jsonl"
example_step "$P" "$F/01-new.in.jsonl" $NOW
example_wait_for pods 3
example_snapshot "$P" "$F/02-pods.in.jsonl"
example_step "$P" "$F/02-pods.in.jsonl" $NOW
example_snapshot "$P" "$F/03-steady.in.jsonl"
# creation times have a resolution of a second: the new pods are younger
sleep 1.1
replicas 5
example_snapshot "$P" "$F/04-up.in.jsonl"
example_step "$P" "$F/04-up.in.jsonl" $NOW
example_wait_for pods 5
example_snapshot "$P" "$F/05-up-done.in.jsonl"
example_step "$P" "$F/05-up-done.in.jsonl" $NOW
replicas 2
example_snapshot "$P" "$F/06-down.in.jsonl"
example_step "$P" "$F/06-down.in.jsonl" $NOW
example_wait_for pods 2
example_snapshot "$P" "$F/07-down-done.in.jsonl"
example_step "$P" "$F/07-down-done.in.jsonl" $NOW

# 08: the Experimental deleted while kwatch records; its pods go with it
example_record_deletion "$P" "$F/08-deleted.in.jsonl" /apis/experiments.vapourware.com/v1alpha1/namespaces/default/experimentals/example-experimental 3
