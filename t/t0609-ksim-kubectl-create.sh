#!/bin/sh
test_description='ksim: kubectl 1.33 create (protobuf bodies) of batch, policy, networking and scheduling kinds stores what kubectl 1.27 create (JSON) stores'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

K27=/usr/lib/google-cloud-sdk/bin/kubectl.1.27
K33=/usr/lib/google-cloud-sdk/bin/kubectl.1.33
test -x "$K27" && test -x "$K33" || test_skip_all 'kubectl 1.27 and 1.33 are needed'

ksim_start --no-simulate

# What two creates of the same object may differ in: identity (uids anywhere: owners, a
# Job's controller-uid labels and selector), namespace, times.
cat >strip.jq <<'EOF'
del(.metadata.resourceVersion, .metadata.creationTimestamp, .metadata.namespace)
| if .metadata.managedFields then .metadata.managedFields |= map(del(.time)) else . end
| walk(if type == "object" then del(.uid, .["controller-uid"], .["batch.kubernetes.io/controller-uid"],
	.lastTransitionTime, .lastUpdateTime, .startTime, .lastProbeTime) else . end)
EOF

test_expect_success 'setup: a namespace for each kubectl' '
	for ns in k27 k33; do
		timeout 30 "$K27" create namespace "$ns" >/dev/null || return 1
	done
'

# RESOURCE NAME ARGS...: the same create with both kubectls, each in its namespace
# (cluster-scoped kinds: NAME27 and NAME33), and the stored objects compared
# (but for the controller flag of an owner reference, which the two kubectls
# set differently: the test of create job --from checks it).
same_create () {
	sc_res=$1 sc_name=$2
	shift 2
	for v in 27 33; do
		eval "K=\$K$v" &&
		eval "timeout 30 \"\$K\" -n k$v $(echo "$*" | sed "s/@/$v/g")" >out 2>err || { cat err; echo "kubectl.1.$v $*"; return 1; }
		timeout 30 "$K27" -n "k$v" get "$sc_res" "$(echo "$sc_name" | sed "s/@/$v/g")" -o json >"k$v.json" || return 1
	done
	jq -S -f strip.jq k27.json | jq -S "del(.metadata.name, .metadata.ownerReferences[]?.controller)" >expect &&
	jq -S -f strip.jq k33.json | jq -S "del(.metadata.name, .metadata.ownerReferences[]?.controller)" >actual &&
	test_cmp expect actual
}

test_expect_success 'create job (with a command) and create job --from a CronJob' '
	same_create jobs.batch once create job once --image=busybox -- sh -c true &&
	same_create cronjobs.batch nightly create cronjob nightly --image=busybox "--schedule=\"0 3 * * *\"" --restart=OnFailure -- true &&
	# kubectl 1.33 marks the CronJob as the Job controller (controller: true), 1.27 does not
	# (as both print with --dry-run=client): that flag is compared on its own
	same_create jobs.batch manual create job manual --from=cronjob/nightly &&
	jq -e ".metadata.ownerReferences | length == 1 and .[0].controller == true" k33.json &&
	jq -e ".metadata.ownerReferences[0] | has(\"controller\") | not" k27.json
'

test_expect_success 'create quota, priorityclass, poddisruptionbudget' '
	same_create resourcequotas q create quota q --hard=cpu=1,memory=1Gi,pods=0 --scopes=NotBestEffort &&
	same_create priorityclasses.scheduling.k8s.io pc@ create priorityclass pc@ --value=0 --description=zero \
		--preemption-policy=Never &&
	same_create poddisruptionbudgets.policy pdb create poddisruptionbudget pdb --selector=app=web --min-available=0 &&
	same_create poddisruptionbudgets.policy pdb2 create poddisruptionbudget pdb2 --selector=app=web --max-unavailable=50%
'

test_expect_success 'create ingress: rules, TLS, a default backend, annotations' '
	same_create ingresses.networking.k8s.io web create ingress web --class=nginx \
		"--rule=\"web.example.com/api*=api:8080,tls=web-tls\"" "--rule=\"web.example.com/=web:http\"" \
		--default-backend=web:80 --annotation=a=b
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
