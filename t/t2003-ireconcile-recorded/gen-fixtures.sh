#!/bin/sh
# Builds the event files of t2003 from t/data/recordings/deployment (run by
# hand; the output is committed): the three watch streams merged in
# resourceVersion order, as kwatch would interleave them.
set -e
R=${TEST_DATA:-../data}/recordings/deployment
BOOKMARK='{"type":"BOOKMARK","object":{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"resourceVersion":"905","annotations":{"k8s.io/initial-events-end":"true"}}}}'
cat "$R/deployments.watch.jsonl" "$R/replicasets.watch.jsonl" "$R/pods.watch.jsonl" |
	jq -c -s 'sort_by(.object.metadata.resourceVersion | tonumber) | .[]' >all.tmp
jq -c 'select((.object.metadata.resourceVersion | tonumber) <= 905)' <all.tmp >initial.tmp
jq -c 'select((.object.metadata.resourceVersion | tonumber) > 905 and (.object.metadata.resourceVersion | tonumber) < 970)' <all.tmp >live.tmp
jq -c 'select((.object.metadata.resourceVersion | tonumber) > 905 and (.object.metadata.resourceVersion | tonumber) <= 930)' <all.tmp >mid.tmp
jq -c 'select((.object.metadata.resourceVersion | tonumber) >= 970)' <all.tmp >deleted.tmp
{ cat initial.tmp; echo "$BOOKMARK"; } >01-initial.in.jsonl
{ cat initial.tmp; echo "$BOOKMARK"; cat mid.tmp; } >02-mid-rollout.in.jsonl
{ cat initial.tmp; echo "$BOOKMARK"; cat live.tmp; } >03-rolled.in.jsonl
{ cat initial.tmp; echo "$BOOKMARK"; cat live.tmp deleted.tmp; } >05-deleted.in.jsonl
# The summary ConfigMap as the API server stores it after our apply (its
# iot-operator/applied annotation is what ireconcile gave 03-rolled): nothing to write.
CM='{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-rollout","namespace":"rec-deploy","uid":"0b8a3c1e-5d0f-4e34-9d55-3f0c1f7e2a10","resourceVersion":"980","creationTimestamp":"2026-11-22T01:22:00Z","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"9c6e1345-a864-4311-b448-d2b282a32dc3","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"iot-operator","operation":"Apply","apiVersion":"v1"}],"annotations":{"iot-operator/applied":"7cae0c27bd197b504ace9248636552ca"}},"data":{"image":"nginx:1.26","replicas":"3","replicaSets":"web-5c6d6746f4,web-5d77888775","running":"web-5d77888775-fkj2x,web-5d77888775-hkjcj,web-5d77888775-m7q5r","podFields":"apiVersion,kind,metadata.labels.app,metadata.labels.pod-template-hash,metadata.name,metadata.namespace,status.phase"}}}'
{ cat initial.tmp; echo "$CM"; echo "$BOOKMARK"; cat live.tmp; } >04-steady.in.jsonl
# A program asking for a child in another namespace than its owner's.
{ jq -c 'if .object.kind == "Deployment" then .object.metadata.annotations["test.example.org/stray"] = "yes" else . end' initial.tmp; echo "$BOOKMARK"; } >06-stray.in.jsonl
rm -f all.tmp initial.tmp live.tmp mid.tmp deleted.tmp
