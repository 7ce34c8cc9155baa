#!/bin/sh
test_description='ksim --data: every acknowledged write survives kill -9; same objects, same resourceVersions, watches resume'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

CM=/api/v1/namespaces/default/configmaps
DATA="$TRASH/data"
N=200

# Creates configmaps $2..$3 with prefix $1; appends each acknowledged name to acked.$1.
writer () {
	w_i=$2
	while test "$w_i" -le "$3"; do
		code=$(curl -sS -m 10 -o /dev/null -w "%{http_code}" -X POST -H "Content-Type: application/json" \
			-d "{\"metadata\":{\"name\":\"$1-$w_i\"},\"data\":{\"i\":\"$w_i\"}}" "$KSIM_URL$CM" 2>/dev/null)
		test "$code" = 201 && echo "$1-$w_i" >>"acked.$1"
		w_i=$((w_i + 1))
	done
}

# name uid resourceVersion data of every configmap the test wrote (not the namespace's kube-root-ca.crt), sorted by name
snapshot () {
	curl -sS -f -m 10 "$KSIM_URL$CM" |
		jq -r ".items[] | select(.metadata.name != \"kube-root-ca.crt\") | [.metadata.name, .metadata.uid, .metadata.resourceVersion, .data.i] | @tsv" | sort
}

# Starts ksim on $DATA again; a ksim a failed test left running is killed first.
restart () {
	if test -n "$KSIM_PID" && kill -KILL "$KSIM_PID" 2>/dev/null; then
		test_wait_for 10 test -f "$TRASH/ksim.rc"
	fi
	ksim_start --data "$DATA" --pod-start-delay 0
}

ksim_start --data "$DATA" --pod-start-delay 0

test_expect_success "write $N objects (4 writers at once), kill -9, restart: the same objects and resourceVersions" '
	writer a 1 50 & writer b 51 100 & writer c 101 150 & writer d 151 200 &
	wait &&
	cat acked.a acked.b acked.c acked.d >acked &&
	test $(wc -l <acked) = $N &&
	snapshot >before &&
	test $(wc -l <before) = $N &&
	curl -sS -f -m 10 "$KSIM_URL$CM" | jq -r .metadata.resourceVersion >rv.before &&
	curl -sS -f -m 10 "$KSIM_URL/api/v1/nodes/ksim-node" | jq -r .metadata.uid >node.before &&
	kill -KILL $KSIM_PID &&
	test_wait_for 10 test -f "$TRASH/ksim.rc"
'

restart

test_expect_success 'after the restart: every object back, identical, the counter goes on' '
	snapshot >after &&
	test_cmp before after &&
	curl -sS -f -m 10 "$KSIM_URL/api/v1/nodes/ksim-node" | jq -r .metadata.uid >node.after &&
	test_cmp node.before node.after &&
	code=$(curl -sS -m 10 -o new.json -w "%{http_code}" -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"new\"}}" "$KSIM_URL$CM") &&
	test "$code" = 201 &&
	test $(jq -r .metadata.resourceVersion new.json) -gt $(cat rv.before) &&
	# versions a watcher may have seen before the crash are never given again
	test $(jq -r .metadata.resourceVersion new.json) -gt $(( $(cat rv.before) + 1000 ))
'

test_expect_success 'a watch from the last resourceVersion before the kill resumes: only what came after' '
	curl -sS -m 10 -o w "$KSIM_URL$CM?watch=true&resourceVersion=$(cat rv.before)&timeoutSeconds=1" &&
	jq -r "[.type, .object.metadata.name] | @tsv" w >actual &&
	printf "ADDED\tnew\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'a watch from an older resourceVersion replays the history it had' '
	mid=$(grep -P "^b-1\t" before | cut -f 3) &&
	curl -sS -m 10 -o w "$KSIM_URL$CM?watch=true&resourceVersion=$mid&timeoutSeconds=1" &&
	# (kube-root-ca.crt, which the simulated cluster makes meanwhile, is not among what the test wrote)
	jq -r ".object.metadata.name | select(. != \"kube-root-ca.crt\")" w | sort >actual &&
	awk -F "\t" -v mid=$mid "\$3 > mid { print \$1 }" before >expect &&
	echo new >>expect &&
	sort -o expect expect &&
	test_cmp expect actual
'

test_expect_success 'deletes and updates survive too' '
	curl -sS -f -m 10 -o /dev/null -X DELETE "$KSIM_URL$CM/a-1" &&
	curl -sS -f -m 10 -o upd.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"data\":{\"i\":\"changed\"}}" "$KSIM_URL$CM/a-2" &&
	snapshot >before2 &&
	kill -KILL $KSIM_PID &&
	test_wait_for 10 test -f "$TRASH/ksim.rc"
'

restart

test_expect_success '... and are there after the next kill -9' '
	snapshot >after2 &&
	test_cmp before2 after2 &&
	! grep -P "^a-1\t" after2 &&
	grep -P "^a-2\t.*\tchanged$" after2
'

test_expect_success 'kill -9 while writes are in flight loses no acknowledged write; a torn last line is dropped' '
	rm -f acked.e acked.f &&
	{ writer e 1 400 & } &&
	{ writer f 1 400 & } &&
	sleep 1 &&
	kill -KILL $KSIM_PID &&
	wait &&
	test_wait_for 10 test -f "$TRASH/ksim.rc" &&
	test -s acked.e && test -s acked.f &&
	printf "{\"rv\":99999999,\"type\":\"ADD" >>"$DATA/wal.jsonl"
'

restart

test_expect_success '... every acknowledged name is there' '
	snapshot | cut -f 1 | sort >names &&
	sort acked.e acked.f >acked &&
	comm -23 acked names >missing &&
	test_cmp /dev/null missing &&
	tail -c 1 "$DATA/wal.jsonl" | od -c | grep "\\\\n" &&
	ksim_stop
'

restart

test_expect_success 'a long log is rewritten as a snapshot at start: same objects and counter, older watches 410' '
	i=0 && : >patches &&
	while test $i -lt 1100; do
		test $i = 0 || echo next >>patches
		printf "request = \"PATCH\"\nheader = \"Content-Type: application/merge-patch+json\"\ndata = \"{\\\"data\\\":{\\\"i\\\":\\\"%d\\\"}}\"\nurl = \"%s\"\noutput = \"/dev/null\"\n" $i "$KSIM_URL$CM/a-2" >>patches
		i=$((i + 1))
	done &&
	curl -sS -f -m 120 -K patches &&
	curl -sS -f -m 10 "$KSIM_URL$CM/a-3" | jq -r .metadata.resourceVersion >rv.old &&
	snapshot >before3 &&
	grep -P "^a-2\t.*\t1099$" before3 &&
	curl -sS -f -m 10 "$KSIM_URL$CM" | jq -r .metadata.resourceVersion >rv.last &&
	lines=$(wc -l <"$DATA/wal.jsonl") &&
	test "$lines" -gt 1100 &&
	kill -KILL $KSIM_PID &&
	test_wait_for 10 test -f "$TRASH/ksim.rc"
'

restart

test_expect_success '... the objects are back and the log is short' '
	snapshot >after3 &&
	test_cmp before3 after3 &&
	test $(wc -l <"$DATA/wal.jsonl") -lt 1000 &&
	grep "rewritten as a snapshot" "$TRASH/ksim.log" &&
	last=$(cat rv.last) && test -n "$last" &&
	curl -sS -m 10 -o w "$KSIM_URL$CM?watch=true&resourceVersion=$last&timeoutSeconds=1" &&
	test_cmp /dev/null w &&
	curl -sS -m 10 -o w "$KSIM_URL$CM?watch=true&resourceVersion=$(cat rv.old)&timeoutSeconds=1" &&
	jq -e "select(.type == \"ERROR\") | .object.code == 410" w &&
	code=$(curl -sS -m 10 -o new.json -w "%{http_code}" -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"after-snapshot\"}}" "$KSIM_URL$CM") &&
	test "$code" = 201 &&
	test $(jq -r .metadata.resourceVersion new.json) -gt "$last" &&
	ksim_stop
'

SVC=/api/v1/namespaces/default/services

restart

test_expect_success 'Service clusterIPs: a restart on the same --data never hands out one in use' '
	for s in s1 s2; do
		curl -sS -f -m 10 -o $s.json -X POST -H "Content-Type: application/json" \
			-d "{\"metadata\":{\"name\":\"$s\"},\"spec\":{\"ports\":[{\"port\":80}]}}" "$KSIM_URL$SVC" || return 1
	done &&
	curl -sS -f -m 10 -o s0.json -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"s0\"},\"spec\":{\"clusterIP\":\"10.96.0.13\",\"ports\":[{\"port\":80}]}}" "$KSIM_URL$SVC" &&
	kill -KILL $KSIM_PID &&
	test_wait_for 10 test -f "$TRASH/ksim.rc"
'

restart

test_expect_success '... new Services get other clusterIPs than the stored ones' '
	for s in s3 s4 s5; do
		curl -sS -f -m 10 -o $s.json -X POST -H "Content-Type: application/json" \
			-d "{\"metadata\":{\"name\":\"$s\"},\"spec\":{\"ports\":[{\"port\":80}]}}" "$KSIM_URL$SVC" || return 1
	done &&
	curl -sS -f -m 10 "$KSIM_URL$SVC" >svcs.json &&
	jq -r ".items[].spec.clusterIP" svcs.json | sort >ips &&
	test $(wc -l <ips) = 7 &&	# s0..s5 and the API server'"'"'s default/kubernetes
	sort -u ips >ips.uniq &&
	test_cmp ips ips.uniq &&
	grep "^10\.96\." ips.uniq >ips.ours &&
	test_cmp ips ips.ours &&
	ksim_stop
'


CRD='{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.test.example.org"},"spec":{"group":"test.example.org","scope":"Namespaced","names":{"plural":"gizmos","singular":"gizmo","kind":"Gizmo","listKind":"GizmoList"},"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"size":{"type":"integer"}}}}}}}]}}'
DEP='{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}'

restart

test_expect_success 'a CRD, a custom object and a Deployment, then a clean stop' '
	curl -sS -f -m 10 -o crd.json -X POST -H "Content-Type: application/json" -d "$CRD" \
		"$KSIM_URL/apis/apiextensions.k8s.io/v1/customresourcedefinitions" &&
	curl -sS -f -m 10 -o crd2.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"metadata\":{\"labels\":{\"edited\":\"yes\"}}}" \
		"$KSIM_URL/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.test.example.org" &&
	curl -sS -f -m 10 -o gizmo.json -X POST -H "Content-Type: application/json" \
		-d "{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Gizmo\",\"metadata\":{\"name\":\"g1\"},\"spec\":{\"size\":3}}" \
		"$KSIM_URL/apis/test.example.org/v1/namespaces/default/gizmos" &&
	curl -sS -f -m 10 -o dep.json -X POST -H "Content-Type: application/json" -d "$DEP" \
		"$KSIM_URL/apis/apps/v1/namespaces/default/deployments" &&
	ksim_stop
'

restart

test_expect_success '... after the restart the CRD serves, the controllers act, and ksim stops clean (no leak of replayed CRDs)' '
	curl -sS -f -m 10 -o g1.json "$KSIM_URL/apis/test.example.org/v1/namespaces/default/gizmos/g1" &&
	test "$(jq -r .spec.size g1.json)" = 3 &&
	dep_ready () {
		curl -sS -f -m 10 -o dep.json "$KSIM_URL/apis/apps/v1/namespaces/default/deployments/web" &&
		jq -e ".status.readyReplicas == 2" dep.json
	} &&
	test_wait_for 20 dep_ready &&
	curl -sS -f -m 10 -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"spec\":{\"replicas\":1}}" "$KSIM_URL/apis/apps/v1/namespaces/default/deployments/web" &&
	dep_scaled () {
		curl -sS -f -m 10 -o dep.json "$KSIM_URL/apis/apps/v1/namespaces/default/deployments/web" &&
		jq -e ".status.replicas == 1" dep.json
	} &&
	test_wait_for 20 dep_scaled &&
	ksim_stop
'

# With --tls, the certificate is kept in --data: clients of the ksim before a
# restart go on trusting it (a new CA at each start failed every one of them).
test_expect_success '--tls with --data: the same certificate after a restart, the old kubeconfig works' '
	rm -rf "$DATA" &&
	ksim_start --tls --token tt --data "$DATA" &&
	cp "$KSIM_CONFIG" kc.before &&
	test -f "$DATA/tls.crt" && test -f "$DATA/tls.key" &&
	test "$(stat -c %a "$DATA/tls.key")" = 600 &&
	ksim_stop &&
	ksim_start --tls --token tt --data "$DATA" &&
	jq -r ".clusters[0].cluster[\"certificate-authority-data\"]" kc.before "$KSIM_CONFIG" | uniq >ca &&
	test $(wc -l <ca) = 1 &&
	jq --arg s "$KSIM_URL" ".clusters[0].cluster.server = \$s" kc.before >kc.old &&
	timeout 30 kubectl --kubeconfig kc.old get ns default -o name </dev/null >got &&
	echo namespace/default >expect && test_cmp expect got &&
	ksim_stop
'

test_done
