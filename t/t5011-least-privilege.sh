#!/bin/sh
test_description='least privilege (issue 32): the operator ServiceAccount, with deploy/ RBAC and deploy/policy/, cannot write outside its namespaces, read other Secrets or bind itself elsewhere, nor (deploy-sharded/) touch a Lease outside O; each refusal names its reason as a real server does (kubectl 1.27 and 1.33)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_kubectls
SA=system:serviceaccount:devawsk8s:iot-operator
I=devawsk8s-example-iotservice

# TLS: kubectl sends a bearer token over HTTPS only.
ksim_start --tls --authorization rbac --token admin-token --sa-token devawsk8s/iot-operator=operator-token \
	--no-simulate

k () {
	timeout 30 kubectl "$@"
}

test_expect_success 'setup: deploy/ as the admin (deploy/policy/ comes below); the instance namespace and its RoleBinding as the ServiceAccount' '
	k apply -k "$PROJECT_ROOT/deploy" >out &&
	k wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s >out &&
	jq ".users[0].user = {token: \"operator-token\"}" "$KUBECONFIG" >op.kubeconfig &&
	cat >instance.yaml <<-EOF &&
	apiVersion: v1
	kind: Namespace
	metadata:
	  name: $I
	  labels: {app.kubernetes.io/managed-by: iot-operator, cp.iot.sap/operator: devawsk8s, pod-security.kubernetes.io/enforce: baseline}
	---
	apiVersion: rbac.authorization.k8s.io/v1
	kind: RoleBinding
	metadata:
	  name: iot-operator-instance
	  namespace: $I
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: iot-operator-instance}
	subjects:
	- {kind: ServiceAccount, name: iot-operator, namespace: devawsk8s}
	EOF
	k --kubeconfig op.kubeconfig apply --server-side --field-manager iot-operator -f instance.yaml >out &&
	k create namespace tenant >out &&
	k create secret generic s -n kube-system --from-literal=token=secret-value >out
'

# refused OUT ARGS...: kubectl ARGS as the ServiceAccount fails with exactly the line OUT (the server's
# words), with each kubectl
refused () {
	rf_want=$1
	shift
	for kc in $versions; do
		if "$kc" --kubeconfig op.kubeconfig "$@" >rf.out 2>rf.err; then
			echo "$kc $*: succeeded as the ServiceAccount" && cat rf.out && return 1
		fi
		if ! grep -qxF "$rf_want" rf.err; then
			echo "$kc $*: want \"$rf_want\", got:" && cat rf.err && return 1
		fi
	done
}

pod_yaml () {
	cat <<-EOF
	apiVersion: v1
	kind: Pod
	metadata: {name: p, namespace: kube-system}
	spec: {serviceAccountName: default, containers: [{name: c, image: busybox}]}
	EOF
}

test_expect_success 'RBAC: a Secret, a Deployment or a Pod in kube-system cannot be created' '
	refused "error: failed to create secret secrets is forbidden: User \"$SA\" cannot create resource \"secrets\" in API group \"\" in the namespace \"kube-system\"" \
		create secret generic t -n kube-system --from-literal=a=b &&
	refused "error: failed to create deployment: deployments.apps is forbidden: User \"$SA\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"kube-system\"" \
		create deployment d -n kube-system --image=busybox &&
	pod_yaml >pod.yaml &&
	refused "Error from server (Forbidden): error when creating \"pod.yaml\": pods is forbidden: User \"$SA\" cannot create resource \"pods\" in API group \"\" in the namespace \"kube-system\"" \
		create -f pod.yaml
'

test_expect_success 'RBAC: a Secret in kube-system cannot be read, nor Secrets listed in all namespaces, nor in O but the template' '
	refused "Error from server (Forbidden): secrets \"s\" is forbidden: User \"$SA\" cannot get resource \"secrets\" in API group \"\" in the namespace \"kube-system\"" \
		get secret s -n kube-system &&
	refused "Error from server (Forbidden): secrets is forbidden: User \"$SA\" cannot list resource \"secrets\" in API group \"\" at the cluster scope" \
		get secrets -A &&
	refused "Error from server (Forbidden): secrets is forbidden: User \"$SA\" cannot list resource \"secrets\" in API group \"\" in the namespace \"devawsk8s\"" \
		get secrets -n devawsk8s &&
	k --kubeconfig op.kubeconfig get secret image-pull-secret -n devawsk8s -o name >out &&
	echo secret/image-pull-secret >expect && test_cmp expect out
'

test_expect_success 'RBAC: in an instance namespace, through its RoleBinding: Secrets written, listed' '
	k --kubeconfig op.kubeconfig create secret generic mine -n $I --from-literal=a=b >out &&
	k --kubeconfig op.kubeconfig get secrets -n $I -o name >out &&
	grep -x secret/mine out
'

# RBAC's escalation check (a RoleBinding to a role whose rights the creator lacks needs bind on it)
test_expect_success 'RBAC: the ServiceAccount binds only iot-operator-instance' '
	cat >admin-rb.yaml <<-EOF &&
	apiVersion: rbac.authorization.k8s.io/v1
	kind: RoleBinding
	metadata: {name: mine, namespace: $I}
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
	subjects:
	- {kind: ServiceAccount, name: iot-operator, namespace: devawsk8s}
	EOF
	refused "Error from server (Forbidden): error when creating \"admin-rb.yaml\": rolebindings.rbac.authorization.k8s.io \"mine\" is forbidden: user \"$SA\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:devawsk8s\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:" \
		create -f admin-rb.yaml
'

ksb_yaml () {
	cat <<-EOF
	apiVersion: rbac.authorization.k8s.io/v1
	kind: RoleBinding
	metadata: {name: iot-operator-instance, namespace: $1}
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: iot-operator-instance}
	subjects:
	- {kind: ServiceAccount, name: iot-operator, namespace: devawsk8s}
	EOF
}

# lease_yaml NAME NAMESPACE HOLDER: a Lease as a replica writes one
# rb_yaml NAME NAMESPACE SUBJECT...: a RoleBinding to iot-operator-instance for those subjects (flow maps)
rb_yaml () {
	rb_name=$1 rb_ns=$2
	shift 2
	cat <<-EOF
	apiVersion: rbac.authorization.k8s.io/v1
	kind: RoleBinding
	metadata: {name: $rb_name, namespace: $rb_ns}
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: iot-operator-instance}
	subjects:
	EOF
	for rb_s in "$@"; do
		echo "- $rb_s"
	done
}

lease_yaml () {
	cat <<-EOF
	apiVersion: coordination.k8s.io/v1
	kind: Lease
	metadata: {name: $1, namespace: $2}
	spec: {holderIdentity: "$3", leaseDurationSeconds: 15}
	EOF
}

# Sharding's Leases (docs/sharding.md) come with deploy-sharded/'s Role iot-operator-shards only.
test_expect_success 'RBAC, deploy/ alone: a Lease created in O, but iot-operator-shard-00 not updated, the Leases not listed' '
	lease_yaml iot-operator-shard-00 devawsk8s a >shard.yaml &&
	k --kubeconfig op.kubeconfig create -f shard.yaml >out &&
	lease_yaml iot-operator-shard-00 devawsk8s b >shard-b.yaml &&
	refused "Error from server (Forbidden): error when replacing \"shard-b.yaml\": leases.coordination.k8s.io \"iot-operator-shard-00\" is forbidden: User \"$SA\" cannot update resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"devawsk8s\"" \
		replace -f shard-b.yaml &&
	refused "Error from server (Forbidden): leases.coordination.k8s.io is forbidden: User \"$SA\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"devawsk8s\"" \
		get leases -n devawsk8s &&
	k get lease iot-operator-shard-00 -n devawsk8s -o jsonpath="{.spec.holderIdentity}{\"\n\"}" >holder &&
	echo a >expect && test_cmp expect holder
'

M=iot-operator-member-iot-operator-7d4b9c-x2x7q

test_expect_success 'RBAC, deploy-sharded/: the Leases of O created, read, updated, listed and deleted' '
	k apply -k "$PROJECT_ROOT/deploy-sharded" >out &&
	k --kubeconfig op.kubeconfig replace -f shard-b.yaml >out &&
	k --kubeconfig op.kubeconfig get lease iot-operator-shard-00 -n devawsk8s -o jsonpath="{.spec.holderIdentity}{\"\n\"}" >holder &&
	echo b >expect && test_cmp expect holder &&
	lease_yaml $M devawsk8s iot-operator-7d4b9c-x2x7q >member.yaml &&
	k --kubeconfig op.kubeconfig create -f member.yaml >out &&
	lease_yaml $M devawsk8s "" >member-released.yaml &&
	k --kubeconfig op.kubeconfig replace -f member-released.yaml >out &&
	k --kubeconfig op.kubeconfig get leases -n devawsk8s -o name >names &&
	printf "lease.coordination.k8s.io/%s\n" $M iot-operator-shard-00 >expect &&
	test_cmp expect names &&
	k --kubeconfig op.kubeconfig delete lease $M -n devawsk8s >out &&
	k --kubeconfig op.kubeconfig get leases -n devawsk8s -o name >names &&
	echo lease.coordination.k8s.io/iot-operator-shard-00 >expect &&
	test_cmp expect names
'

test_expect_success 'RBAC, deploy-sharded/: no Lease of another namespace created, read, updated, listed or deleted' '
	lease_yaml kube-controller-manager kube-system master-1 >ks-lease.yaml &&
	k create -f ks-lease.yaml >out &&
	refused "Error from server (Forbidden): leases.coordination.k8s.io \"kube-controller-manager\" is forbidden: User \"$SA\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\"" \
		get lease kube-controller-manager -n kube-system &&
	refused "Error from server (Forbidden): leases.coordination.k8s.io is forbidden: User \"$SA\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\"" \
		get leases -n kube-system &&
	refused "Error from server (Forbidden): leases.coordination.k8s.io is forbidden: User \"$SA\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster scope" \
		get leases -A &&
	lease_yaml kube-controller-manager kube-system mine >ks-lease-mine.yaml &&
	refused "Error from server (Forbidden): error when replacing \"ks-lease-mine.yaml\": leases.coordination.k8s.io \"kube-controller-manager\" is forbidden: User \"$SA\" cannot update resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\"" \
		replace -f ks-lease-mine.yaml &&
	refused "Error from server (Forbidden): leases.coordination.k8s.io \"kube-controller-manager\" is forbidden: User \"$SA\" cannot delete resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\"" \
		delete lease kube-controller-manager -n kube-system &&
	lease_yaml iot-operator-shard-00 tenant mine >tenant-lease.yaml &&
	refused "Error from server (Forbidden): error when creating \"tenant-lease.yaml\": leases.coordination.k8s.io is forbidden: User \"$SA\" cannot create resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"tenant\"" \
		create -f tenant-lease.yaml &&
	k get lease kube-controller-manager -n kube-system -o jsonpath="{.spec.holderIdentity}{\"\n\"}" >holder &&
	echo master-1 >expect && test_cmp expect holder
'

# What README says remains open without admissionregistration.k8s.io/v1 (1.27 to 1.29): RBAC
# cannot limit create on RoleBindings by namespace, so the ServiceAccount can bind itself
# iot-operator-instance anywhere, then read that namespace's Secrets and run a Deployment there as
# any ServiceAccount of it, mounting the node; and patch, delete on namespaces are not limited by label.
test_expect_success 'without the policy (a server before 1.30), what remains open: iot-operator-instance bound in kube-system, its Secrets read, a Deployment there as its ServiceAccount, on the node'"'"'s root' '
	ksb_yaml kube-system >ks-rb.yaml &&
	k --kubeconfig op.kubeconfig create -f ks-rb.yaml >out &&
	k --kubeconfig op.kubeconfig get secrets -n kube-system -o name >out &&
	grep -x secret/s out &&
	cat >ks-deploy.yaml <<-\EOF &&
	apiVersion: apps/v1
	kind: Deployment
	metadata: {name: node-root, namespace: kube-system}
	spec:
	  selector: {matchLabels: {app: node-root}}
	  template:
	    metadata: {labels: {app: node-root}}
	    spec:
	      serviceAccountName: default
	      hostPID: true
	      containers: [{name: c, image: busybox, securityContext: {privileged: true}}]
	      volumes: [{name: root, hostPath: {path: /}}]
	EOF
	k --kubeconfig op.kubeconfig create -f ks-deploy.yaml >out &&
	k delete -f ks-deploy.yaml >out &&
	k delete -f ks-rb.yaml >out
'

test_expect_success 'without the policy, what remains open: iot-operator-instance bound to a tenant'"'"'s ServiceAccount in an instance namespace' '
	rb_yaml leak $I "{kind: ServiceAccount, name: iot-operator, namespace: tenant}" >leak-rb.yaml &&
	k --kubeconfig op.kubeconfig create -f leak-rb.yaml >out &&
	k delete -f leak-rb.yaml >out
'

# RBAC's escalation check lets whoever may create RoleBindings bind any role whose rights it holds
# there, to anyone: bind adds iot-operator-instance to those (README, bind and CIS 4.1.7).
own_rb_yaml () {
	cat <<-EOF
	apiVersion: rbac.authorization.k8s.io/v1
	kind: RoleBinding
	metadata: {name: handed-on, namespace: tenant}
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: iot-operator}
	subjects:
	- {kind: ServiceAccount, name: default, namespace: tenant}
	EOF
}

test_expect_success 'without the policy, what remains open: the ServiceAccount hands its own rights on (its ClusterRole bound to a tenant'"'"'s ServiceAccount)' '
	own_rb_yaml >handed-on.yaml &&
	k --kubeconfig op.kubeconfig create -f handed-on.yaml >out &&
	k delete -f handed-on.yaml >out
'

test_expect_success 'without the policy, what remains open: the Pod Security level of an instance namespace lowered, a namespace made without it' '
	k --kubeconfig op.kubeconfig label namespace $I pod-security.kubernetes.io/enforce=privileged --overwrite >out &&
	k --kubeconfig op.kubeconfig create namespace no-psa >out &&
	k label namespace $I pod-security.kubernetes.io/enforce=baseline --overwrite >out &&
	k delete namespace no-psa --wait=false >out
'

# ksim serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies, as Kubernetes 1.30 and later
# do: the policy's tests run on it, always.
test_expect_success 'the server serves ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1)' '
	ksim_curl -o arv1.json /apis/admissionregistration.k8s.io/v1 &&
	jq -e "any(.resources[]?; .name == \"validatingadmissionpolicies\") and
		any(.resources[]?; .name == \"validatingadmissionpolicybindings\")" arv1.json
'

test_expect_success 'deploy/policy/ installed as the admin' '
	k apply -k "$PROJECT_ROOT/deploy/policy" >out
'

test_expect_success 'the policy: a RoleBinding to iot-operator-instance in kube-system, or in O, is refused' '
	ksb_yaml kube-system >ks-rb.yaml &&
	refused "Error from server (Forbidden): error when creating \"ks-rb.yaml\": rolebindings.rbac.authorization.k8s.io \"iot-operator-instance\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator writes only in its namespace devawsk8s and in namespaces labelled cp.iot.sap/operator=devawsk8s" \
		create -f ks-rb.yaml &&
	ksb_yaml devawsk8s >o-rb.yaml &&
	refused "Error from server (Forbidden): error when creating \"o-rb.yaml\": rolebindings.rbac.authorization.k8s.io \"iot-operator-instance\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator binds only the ClusterRole iot-operator-instance, only to its own ServiceAccount devawsk8s/iot-operator as the one subject, and only in its instance namespaces" \
		create -f o-rb.yaml
'

test_expect_success 'the policy: iot-operator-instance bound to another subject in an instance namespace is refused' '
	ksb_yaml $I | sed "s/name: iot-operator-instance, namespace/name: other, namespace/; s/name: iot-operator, namespace: devawsk8s/name: default, namespace: $I/" >other-rb.yaml &&
	grep "name: default" other-rb.yaml &&
	refused "Error from server (Forbidden): error when creating \"other-rb.yaml\": rolebindings.rbac.authorization.k8s.io \"other\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator binds only the ClusterRole iot-operator-instance, only to its own ServiceAccount devawsk8s/iot-operator as the one subject, and only in its instance namespaces" \
		create -f other-rb.yaml
'

# RBAC lets the ServiceAccount bind iot-operator-instance to anyone (bind by name); the policy
# allows exactly one subject, the ServiceAccount itself, by name and namespace.
test_expect_success 'the policy: iot-operator-instance bound to iot-operator of another namespace, a User, a Group or two subjects is refused' '
	want () {
		echo "Error from server (Forbidden): error when creating \"$1.yaml\": rolebindings.rbac.authorization.k8s.io \"$1\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator binds only the ClusterRole iot-operator-instance, only to its own ServiceAccount devawsk8s/iot-operator as the one subject, and only in its instance namespaces"
	} &&
	rb_yaml tenant-sa $I "{kind: ServiceAccount, name: iot-operator, namespace: tenant}" >tenant-sa.yaml &&
	refused "$(want tenant-sa)" create -f tenant-sa.yaml &&
	rb_yaml no-ns $I "{kind: ServiceAccount, name: iot-operator}" >no-ns.yaml &&
	refused "$(want no-ns)" create -f no-ns.yaml &&
	rb_yaml user $I "{apiGroup: rbac.authorization.k8s.io, kind: User, name: \"$SA\"}" >user.yaml &&
	refused "$(want user)" create -f user.yaml &&
	rb_yaml group $I "{apiGroup: rbac.authorization.k8s.io, kind: Group, name: \"system:serviceaccounts:tenant\"}" >group.yaml &&
	refused "$(want group)" create -f group.yaml &&
	rb_yaml two $I "{kind: ServiceAccount, name: iot-operator, namespace: devawsk8s}" \
		"{kind: ServiceAccount, name: iot-operator, namespace: tenant}" >two.yaml &&
	refused "$(want two)" create -f two.yaml &&
	k get rolebindings -n $I -o name >names &&
	echo rolebinding.rbac.authorization.k8s.io/iot-operator-instance >expect &&
	test_cmp expect names &&
	own_rb_yaml >handed-on.yaml &&
	refused "Error from server (Forbidden): error when creating \"handed-on.yaml\": rolebindings.rbac.authorization.k8s.io \"handed-on\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator writes only in its namespace devawsk8s and in namespaces labelled cp.iot.sap/operator=devawsk8s" \
		create -f handed-on.yaml &&
	own_rb_yaml | sed "s/namespace: tenant}\$/namespace: $I}/" >handed-on-i.yaml &&
	grep "name: handed-on, namespace: $I}" handed-on-i.yaml &&
	refused "Error from server (Forbidden): error when creating \"handed-on-i.yaml\": rolebindings.rbac.authorization.k8s.io \"handed-on\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator binds only the ClusterRole iot-operator-instance, only to its own ServiceAccount devawsk8s/iot-operator as the one subject, and only in its instance namespaces" \
		create -f handed-on-i.yaml
'

test_expect_success 'the policy: kube-system cannot be labelled an instance namespace, an unlabelled namespace not deleted' '
	refused "Error from server (Forbidden): namespaces \"kube-system\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator may create only namespaces labelled cp.iot.sap/operator=devawsk8s, and change or delete only namespaces that carry that label" \
		label namespace kube-system cp.iot.sap/operator=devawsk8s &&
	refused "Error from server (Forbidden): namespaces \"tenant\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator may create only namespaces labelled cp.iot.sap/operator=devawsk8s, and change or delete only namespaces that carry that label" \
		delete namespace tenant --wait=false &&
	refused "Error from server (Forbidden): namespaces \"other\" is forbidden: ValidatingAdmissionPolicy '"'"'iot-operator'"'"' with binding '"'"'iot-operator'"'"' denied request: the operator may create only namespaces labelled cp.iot.sap/operator=devawsk8s, and change or delete only namespaces that carry that label" \
		create namespace other &&
	k get namespace kube-system -o jsonpath="{.metadata.labels}" >labels &&
	! grep cp.iot.sap labels &&
	k get namespace tenant -o name >out
'

PSA="ValidatingAdmissionPolicy 'iot-operator' with binding 'iot-operator' denied request: the operator's namespaces enforce Pod Security baseline or restricted (the label pod-security.kubernetes.io/enforce), from their creation on"

# ns_yaml NAME [ENFORCE]: an instance namespace as the operator writes it, with that Pod Security level
ns_yaml () {
	cat <<-EOF
	apiVersion: v1
	kind: Namespace
	metadata:
	  name: $1
	  labels: {cp.iot.sap/operator: devawsk8s${2:+, pod-security.kubernetes.io/enforce: $2}}
	EOF
}

test_expect_success 'the policy: an instance namespace without Pod Security baseline is not created, its label not removed nor weakened' '
	ns_yaml psa-none >psa-none.yaml &&
	refused "Error from server (Forbidden): error when creating \"psa-none.yaml\": namespaces \"psa-none\" is forbidden: $PSA" \
		create -f psa-none.yaml &&
	ns_yaml psa-privileged privileged >psa-privileged.yaml &&
	refused "Error from server (Forbidden): error when creating \"psa-privileged.yaml\": namespaces \"psa-privileged\" is forbidden: $PSA" \
		create -f psa-privileged.yaml &&
	refused "Error from server (Forbidden): namespaces \"$I\" is forbidden: $PSA" \
		label namespace $I pod-security.kubernetes.io/enforce=privileged --overwrite &&
	refused "Error from server (Forbidden): namespaces \"$I\" is forbidden: $PSA" \
		label namespace $I pod-security.kubernetes.io/enforce- &&
	k get namespace $I -o jsonpath="{.metadata.labels.pod-security\.kubernetes\.io/enforce}{\"\n\"}" >level &&
	echo baseline >expect && test_cmp expect level &&
	ns_yaml psa-restricted restricted >psa-restricted.yaml &&
	k --kubeconfig op.kubeconfig create -f psa-restricted.yaml >out &&
	k --kubeconfig op.kubeconfig label namespace psa-restricted pod-security.kubernetes.io/enforce=baseline --overwrite >out &&
	k get namespaces -o name >names &&
	! grep -e psa-none -e psa-privileged names
'

NODE="ValidatingAdmissionPolicy 'iot-operator' with binding 'iot-operator' denied request: the operator's Deployments and StatefulSets run no pod that reaches its node (host network, PID or IPC, hostPath volumes, privileged containers, added capabilities, host ports)"

# workload_yaml KIND NAME POD-SPEC-LINES...: a Deployment or StatefulSet in the instance namespace
workload_yaml () {
	wl_kind=$1 wl_name=$2
	shift 2
	cat <<-EOF
	apiVersion: apps/v1
	kind: $wl_kind
	metadata: {name: $wl_name, namespace: $I}
	spec:
	  selector: {matchLabels: {app: $wl_name}}
	  template:
	    metadata: {labels: {app: $wl_name}}
	    spec:
	EOF
	for wl_l in "$@"; do
		echo "      $wl_l"
	done
}

test_expect_success 'the policy: no Deployment or StatefulSet in an instance namespace reaches its node' '
	c="containers: [{name: c, image: busybox}]" &&
	workload_yaml Deployment hostpath "$c" "volumes: [{name: root, hostPath: {path: /}}]" >hostpath.yaml &&
	workload_yaml Deployment hostnet "$c" "hostNetwork: true" >hostnet.yaml &&
	workload_yaml StatefulSet hostpid "$c" "hostPID: true" >hostpid.yaml &&
	workload_yaml Deployment hostipc "$c" "hostIPC: true" >hostipc.yaml &&
	workload_yaml StatefulSet privileged \
		"containers: [{name: c, image: busybox, securityContext: {privileged: true}}]" >privileged.yaml &&
	workload_yaml Deployment caps "$c" \
		"initContainers: [{name: i, image: busybox, securityContext: {capabilities: {add: [SYS_ADMIN]}}}]" >caps.yaml &&
	workload_yaml Deployment hostport "containers: [{name: c, image: busybox, ports: [{containerPort: 22, hostPort: 22}]}]" \
		>hostport.yaml &&
	for w in hostpath hostnet hostipc caps hostport; do
		refused "Error from server (Forbidden): error when creating \"$w.yaml\": deployments.apps \"$w\" is forbidden: $NODE" \
			create -f $w.yaml || return 1
	done &&
	for w in hostpid privileged; do
		refused "Error from server (Forbidden): error when creating \"$w.yaml\": statefulsets.apps \"$w\" is forbidden: $NODE" \
			create -f $w.yaml || return 1
	done &&
	k get deployments,statefulsets -n $I -o name >names &&
	test_cmp /dev/null names
'

test_expect_success 'the policy: a workload of the operator'"'"'s kind is written, and not made privileged afterwards' '
	workload_yaml Deployment plain "containers: [{name: c, image: busybox, securityContext: {capabilities: {drop: [ALL]}}}]" \
		"volumes: [{name: s, secret: {secretName: mine}}]" "securityContext: {fsGroup: 999}" >plain.yaml &&
	k --kubeconfig op.kubeconfig apply --server-side --field-manager iot-operator -f plain.yaml >out &&
	workload_yaml Deployment plain "containers: [{name: c, image: busybox, securityContext: {capabilities: {drop: [ALL]}, privileged: true}}]" \
		"volumes: [{name: s, secret: {secretName: mine}}]" "securityContext: {fsGroup: 999}" >plain-priv.yaml &&
	refused "Error from server (Forbidden): deployments.apps \"plain\" is forbidden: $NODE" \
		apply --server-side --field-manager iot-operator -f plain-priv.yaml &&
	k get deployment plain -n $I -o jsonpath="{.spec.template.spec.containers[0].securityContext}{\"\n\"}" >sc &&
	! grep privileged sc
'

test_expect_success 'the policy lets the operator do its work: an instance namespace and its children, deleted' '
	k --kubeconfig op.kubeconfig create secret generic mine2 -n $I --from-literal=a=b >out &&
	k --kubeconfig op.kubeconfig delete namespace $I --wait=false >out
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
