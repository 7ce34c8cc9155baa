#!/bin/sh
# Records the event files of t2801 from a run on ksim (after a build; run from
# anywhere). Each NN-*.in.jsonl is what kwatch printed (--once: the state, then
# the BOOKMARK line; 06-deleted: a live --record across a deletion). Between
# snapshots, one reconcile is done by hand (ireconcile | kapply | kstatus) and
# ksim's simulated controllers run the pods. The files are committed; a person
# reads the diff, then regenerates the golden files (UPDATE_GOLDEN=1).
set -e
F=$(cd "$(dirname "$0")" && pwd)
PROJECT_ROOT=$(cd "$F/../.." && pwd)
PATH="$PROJECT_ROOT/bin:$PATH"
P="$PROJECT_ROOT/pipeline/memcached"
NOW=2026-11-22T10:00:00Z
. "$F/../lib-examples.sh"
example_fixtures_ksim

running () {
	example_get "/api/v1/namespaces/default/pods?labelSelector=app%3Dmemcached" pods.json &&
	test "$(jq '[.items[] | select(.status.phase == "Running")] | length' pods.json)" = "$1"
}

kapply -f "$PROJECT_ROOT/deploy/examples/memcached/crd.yaml" -f "$PROJECT_ROOT/deploy/examples/memcached/example.yaml" >/dev/null
example_snapshot "$P" "$F/01-new.in.jsonl"
example_step "$P" "$F/01-new.in.jsonl" $NOW
example_wait_for running 3
example_snapshot "$P" "$F/02-pods.in.jsonl"
example_step "$P" "$F/02-pods.in.jsonl" $NOW
example_snapshot "$P" "$F/03-steady.in.jsonl"
kapply -f - >/dev/null <<-\EOT
	{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"example-memcached","namespace":"default"},"spec":{"size":4}}
EOT
example_snapshot "$P" "$F/04-scale.in.jsonl"
example_step "$P" "$F/04-scale.in.jsonl" $NOW
example_wait_for running 4
example_snapshot "$P" "$F/05-scaled.in.jsonl"
example_step "$P" "$F/05-scaled.in.jsonl" $NOW

# 06: the Memcached deleted while kwatch records; the garbage collector
# deletes the Deployment, the ReplicaSet's pods go with it
example_record_deletion "$P" "$F/06-deleted.in.jsonl" /apis/cache.example.com/v1alpha1/namespaces/default/memcacheds/example-memcached 6
