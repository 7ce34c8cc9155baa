#!/bin/sh
test_description='kwatch RESOURCE@~: one watch per namespace the namespaces watch writes, started as namespaces come, ended (DELETED stubs first) as they go; usage errors'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

# a bare API server: no simulated controllers adding objects to the streams compared here
ksim_start --no-simulate || exit 1
L=cp.iot.sap/operator=o

api () { # METHOD PATH [BODY]
	if test $# -ge 3; then
		curl -sS -f -X "$1" -H "Content-Type: application/json" --data-binary "$3" "$KSIM_URL$2"
	else
		curl -sS -f -X "$1" "$KSIM_URL$2"
	fi
}
ns () { # NAME [LABELS-JSON]
	api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"$1\",\"labels\":${2:-{\}}}}" >/dev/null
}
secret () { # NAMESPACE NAME
	api POST "/api/v1/namespaces/$1/secrets" "{\"metadata\":{\"name\":\"$2\"},\"data\":{\"k\":\"dg==\"}}" >/dev/null
}
summary () { # FILE: "TYPE Kind namespace/name" per line
	jq -r '[.type, .object.kind, (.object.metadata.namespace // "") + "/" + (.object.metadata.name // "")] | join(" ")' "$1"
}

test_expect_success 'usage: RESOURCE@~ needs a namespaces watch, and a namespaced resource' '
	test_expect_code 100 kwatch --once "secrets@~" 2>err &&
	grep -F "needs a namespaces watch among the resources" err &&
	test_expect_code 100 kwatch --once namespaces "nodes@~" 2>err &&
	grep -F "nodes are not namespaced" err
'

test_expect_success 'setup: labelled namespaces a and b with Secrets, c unlabelled' '
	ns a "{\"cp.iot.sap/operator\":\"o\"}" && secret a s1 && secret a s2 &&
	ns b "{\"cp.iot.sap/operator\":\"o\"}" && secret b s1 &&
	ns c && secret c s1
'

test_expect_success '--once: the Secrets of the labelled namespaces only, all before the BOOKMARK' '
	kwatch --once "namespaces:l=$L" "secrets@~" >once.out 2>once.err &&
	summary once.out | sed "/^BOOKMARK /,\$d" | grep "^ADDED Secret" | sort >actual &&
	printf "ADDED Secret a/s1\nADDED Secret a/s2\nADDED Secret b/s1\n" >expect &&
	test_cmp expect actual &&
	test "$(grep -c BOOKMARK once.out)" = 1 &&
	test_no_sanitizer_report once.err
'

test_expect_success 'a shard selector by namespace: watches only in the namespaces it selects' '
	ns e1 "{\"cp.iot.sap/operator\":\"o\"}" && secret e1 s1 &&
	# (FNV-1a: a and b hash into the upper half, e1 into the lower)
	hi=$("$KOP_TEST_TOOL" shard-split namespace 1 2) &&
	lo=$("$KOP_TEST_TOOL" shard-split namespace 0 2) &&
	kwatch -v --once "namespaces:l=$L" "secrets@~:s=$hi" >hi.out 2>hi.err &&
	summary hi.out | grep "^ADDED Secret" | sort >actual &&
	printf "ADDED Secret a/s1\nADDED Secret a/s2\nADDED Secret b/s1\n" >expect &&
	test_cmp expect actual &&
	grep -F "watching '"'"'secrets'"'"' in b" hi.err &&
	! grep -F "watching '"'"'secrets'"'"' in e1" hi.err &&
	kwatch -v --once "namespaces:l=$L" "secrets@~:s=$lo" >lo.out 2>lo.err &&
	summary lo.out | grep "^ADDED Secret" >actual &&
	echo "ADDED Secret e1/s1" >expect &&
	test_cmp expect actual &&
	! grep -F "watching '"'"'secrets'"'"' in a" lo.err &&
	test_no_sanitizer_report hi.err && test_no_sanitizer_report lo.err
'

test_expect_success 'live: a namespace that comes is watched, one that goes says DELETED for what it held, before itself, once' '
	{ timeout 60 kwatch "namespaces:l=$L" "secrets@~" >live.out 2>live.err & echo $! >live.pid; } &&
	test_when_finished "kill \$(cat live.pid) 2>/dev/null; :" &&
	test_wait_for 10 grep -q BOOKMARK live.out &&
	ns d "{\"cp.iot.sap/operator\":\"o\"}" && secret d s9 &&
	test_wait_for 10 grep -q "\"name\":\"s9\"" live.out &&
	api DELETE /api/v1/namespaces/a >/dev/null &&
	a_gone () { summary live.out | grep -qx "DELETED Namespace /a"; } &&
	test_wait_for 20 a_gone &&
	sleep 1 &&
	summary live.out | sed "1,/^BOOKMARK /d" >after &&
	grep -x "ADDED Secret d/s9" after &&
	test "$(grep -c "^DELETED Secret a/s1\$" after)" = 1 &&
	test "$(grep -c "^DELETED Secret a/s2\$" after)" = 1 &&
	grep -n "" after | grep -E "DELETED (Secret a/s1|Secret a/s2|Namespace /a)\$" | cut -d: -f2 >order &&
	tail -n 1 order >last && echo "DELETED Namespace /a" >expect && test_cmp expect last &&
	! grep " c/" after &&
	api POST /api/v1/namespaces/b/secrets "{\"metadata\":{\"name\":\"s5\"}}" >/dev/null &&
	test_wait_for 10 grep -q "\"name\":\"s5\"" live.out &&
	kill -TERM $(cat live.pid) &&
	wait $(cat live.pid) &&
	test_no_sanitizer_report live.err
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

# With RBAC: the rights in a namespace come from a RoleBinding made after it (README, the operator's
# rights). Until it is there, that namespace's watch meets 403 and is retried; it is never the end.
ksim_start --tls --authorization rbac --token admin-token --sa-token o/watcher=watcher-token --no-simulate

test_expect_success 'RBAC setup: the ServiceAccount o/watcher may watch namespaces and RoleBindings, Secrets nowhere yet' '
	cat >rbac.yaml <<-\EOF &&
	apiVersion: rbac.authorization.k8s.io/v1
	kind: ClusterRole
	metadata: {name: watcher}
	rules:
	- {apiGroups: [""], resources: [namespaces], verbs: [list, watch]}
	- {apiGroups: [rbac.authorization.k8s.io], resources: [rolebindings], verbs: [list, watch]}
	---
	apiVersion: rbac.authorization.k8s.io/v1
	kind: ClusterRoleBinding
	metadata: {name: watcher}
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: watcher}
	subjects: [{kind: ServiceAccount, name: watcher, namespace: o}]
	---
	apiVersion: rbac.authorization.k8s.io/v1
	kind: ClusterRole
	metadata: {name: secrets-reader}
	rules:
	- {apiGroups: [""], resources: [secrets], verbs: [list, watch]}
	---
	apiVersion: v1
	kind: Namespace
	metadata: {name: r1, labels: {cp.iot.sap/operator: o}}
	---
	apiVersion: v1
	kind: Namespace
	metadata: {name: r2, labels: {cp.iot.sap/operator: o}}
	---
	apiVersion: v1
	kind: Secret
	metadata: {name: s1, namespace: r1}
	---
	apiVersion: v1
	kind: Secret
	metadata: {name: s2, namespace: r2}
	EOF
	timeout 30 kubectl apply -f rbac.yaml >out &&
	jq ".users[0].user = {token: \"watcher-token\"}" "$KUBECONFIG" >watcher.kubeconfig &&
	test_expect_code 1 timeout 30 kubectl --kubeconfig watcher.kubeconfig get secrets -n r1 >out 2>err &&
	grep -F "cannot list resource \"secrets\"" err
'

# rb_in NAMESPACE: the RoleBinding that lets the ServiceAccount read its Secrets
rb_in () {
	cat <<-EOF | timeout 30 kubectl apply -f - >rb.out
	apiVersion: rbac.authorization.k8s.io/v1
	kind: RoleBinding
	metadata: {name: secrets, namespace: $1, labels: {cp.iot.sap/operator: o}}
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: secrets-reader}
	subjects: [{kind: ServiceAccount, name: watcher, namespace: o}]
	EOF
}

test_expect_success 'RBAC: a namespace without the rights is retried (403 at info, the BOOKMARK not held back), its Secrets come once its RoleBinding is there' '
	{ KUBECONFIG=watcher.kubeconfig timeout 120 kwatch -v "namespaces:l=$L" "secrets@~" >rbac.out 2>rbac.err &
	  echo $! >rbac.pid; } &&
	test_when_finished "kill \$(cat rbac.pid) 2>/dev/null; :" &&
	test_wait_for 20 grep -q BOOKMARK rbac.out &&
	test_wait_for 20 grep -q "no right to [a-z]* .secrets. in namespace .r1. yet (2 in a row" rbac.err &&
	grep "\"level\":\"info\".*no right to [a-z]* .secrets. in namespace .r1. yet" rbac.err &&
	! grep "\"name\":\"s1\"" rbac.out &&
	rb_in r1 &&
	test_wait_for 40 grep -q "\"name\":\"s1\"" rbac.out &&
	summary rbac.out | grep "Secret" >actual &&
	echo "ADDED Secret r1/s1" >expect &&
	test_cmp expect actual &&
	kill -0 $(cat rbac.pid) &&
	kill -TERM $(cat rbac.pid) &&
	wait $(cat rbac.pid) &&
	test_no_sanitizer_report rbac.err
'

test_expect_success 'RBAC: with RoleBindings watched too, the RoleBinding that grants the rights ends the wait at once, not at the next backoff' '
	{ KUBECONFIG=watcher.kubeconfig timeout 120 kwatch -v "namespaces:l=$L" "rolebindings@*:l=$L" "secrets@~" \
		>rbac2.out 2>rbac2.err & echo $! >rbac2.pid; } &&
	test_when_finished "kill \$(cat rbac2.pid) 2>/dev/null; :" &&
	: "seven 403s in a row: the next retry is seconds away (again in N ms)" &&
	test_wait_for 40 grep -q "no right to [a-z]* .secrets. in namespace .r2. yet (7 in a row" rbac2.err &&
	start=$(date +%s%N) &&
	next=$(sed -n "s/.*namespace .r2. yet (7 in a row.*again in \([0-9]*\) ms.*/\1/p" rbac2.err) &&
	rb_in r2 &&
	test_wait_for 20 grep -q "\"name\":\"s2\"" rbac2.out &&
	end=$(date +%s%N) &&
	echo "the Secret after $(( (end - start) / 1000000 )) ms; the next retry was $next ms away" &&
	test "$next" -ge 5000 &&
	test $(( (end - start) / 1000000 )) -lt $((next - 2000)) &&
	kill -TERM $(cat rbac2.pid) &&
	wait $(cat rbac2.pid) &&
	test_no_sanitizer_report rbac2.err
'

test_expect_success 'ksim (RBAC) stops cleanly' '
	ksim_stop
'

test_done
