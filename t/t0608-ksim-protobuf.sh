#!/bin/sh
test_description='ksim: protobuf request bodies (application/vnd.kubernetes.protobuf) of built-in kinds give the objects their JSON bodies give'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

K27=/usr/lib/google-cloud-sdk/bin/kubectl.1.27
K33=/usr/lib/google-cloud-sdk/bin/kubectl.1.33
test -x "$K27" && test -x "$K33" || test_skip_all 'kubectl 1.27 and 1.33 are needed'

ksim_start --no-simulate

PB="Content-Type: application/vnd.kubernetes.protobuf"

# What two creates of the same object may differ in: identity (uids anywhere, as in a Job's
# controller-uid labels), times, the managers' times.
cat >strip.jq <<'EOF'
del(.metadata.resourceVersion, .metadata.creationTimestamp, .metadata.generateName)
| if .metadata.managedFields then .metadata.managedFields |= map(del(.time)) else . end
| walk(if type == "object" then del(.uid, .["controller-uid"], .["batch.kubernetes.io/controller-uid"],
	.lastTransitionTime, .lastUpdateTime, .startTime, .lastProbeTime) else . end)
EOF

# The example of a kind: t0608-ksim-protobuf/KIND.APIVERSION (/ as _).json
example () {
	echo "$FIXTURES/$1.$(echo "$2" | tr / _).json"
}

# 0 once GET $1 answers 404.
gone () {
	test "$(ksim_curl -o /dev/null -w "%{http_code}" "$1")" = 404
}

test_expect_success 'setup: the namespace of the namespaced examples' '
	ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" \
		-d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"pj\"}}" /api/v1/namespaces
'

test_expect_success 'the examples are Go JSON of their objects: encoded and decoded by the table they come back unchanged' '
	for f in "$FIXTURES"/*.json; do
		"$KOP_TEST_TOOL" proto-encode <"$f" >body.pb &&
		"$KOP_TEST_TOOL" proto-decode <body.pb >back.json &&
		jq -S . "$f" >expect &&
		jq -S . back.json >actual &&
		test_cmp expect actual || { echo "example $f"; return 1; }
	done
'

test_expect_success 'what kubectl 1.27 sends as JSON (its generators, --dry-run=client) round-trips through the table unchanged' '
	cat >gens <<-\EOF &&
	create namespace n1
	create configmap cm --from-literal=a=b --from-literal=empty=
	create secret generic s --from-literal=a=b
	create secret docker-registry dr --docker-server=r.example.com --docker-username=u --docker-password=p
	create deployment d --image=nginx --replicas=0 --port=80
	create service clusterip c --tcp=80:8080
	create service nodeport np --tcp=80:8080 --node-port=30001
	create service loadbalancer lb --tcp=443
	create service externalname e --external-name=x.example.com
	create serviceaccount sa
	create role r --verb=get,list --resource=pods,deployments.apps --resource-name=web
	create rolebinding rb --role=r --user=u --serviceaccount=pj:robot
	create clusterrole cr --verb=get --non-resource-url=/metrics
	create clusterrolebinding crb --clusterrole=cr --group=g
	create job j --image=busybox
	create cronjob cj --image=busybox --schedule="*/5 * * * *"
	create quota q --hard=cpu=1,pods=0
	create priorityclass pc --value=0 --description=zero
	create poddisruptionbudget pdb --selector=a=b --min-available=0
	create ingress ing --rule=web.example.com/api*=svc:80,tls=cert
	run p --image=nginx --port=80 --env=A=B --labels=a=b --restart=Never
	EOF
	while read -r args; do
		# without a server kubectl uses its built-in mapping (jobs, quotas... whether ksim serves them or not)
		eval "timeout 30 \"\$K27\" --server=http://127.0.0.1:9 -n pj $args --dry-run=client -o json" >gen.json 2>err ||
		eval "timeout 30 \"\$K27\" -n pj $args --dry-run=client -o json" >gen.json 2>err ||
		{ echo "kubectl $args"; cat err; return 1; }
		"$KOP_TEST_TOOL" proto-encode <gen.json >body.pb &&
		"$KOP_TEST_TOOL" proto-decode <body.pb >back.json &&
		jq -S . gen.json >expect &&
		jq -S . back.json >actual &&
		test_cmp expect actual || { echo "kubectl $args"; return 1; }
	done <gens
'

# POST the example as JSON, read it, delete it; the same as protobuf; the two stored objects equal.
roundtrip () {
	rt_coll=$1 rt_file=$2
	rt_name=$(jq -r .metadata.name "$rt_file")
	ksim_curl -o created.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" \
		--data-binary @"$rt_file" "$rt_coll" >code &&
	echo 201 >expect && test_cmp expect code || { cat created.json; return 1; }
	ksim_curl -f "$rt_coll/$rt_name" >json.out &&
	ksim_curl -f -o /dev/null -X DELETE "$rt_coll/$rt_name?gracePeriodSeconds=0" &&
	test_wait_for 20 gone "$rt_coll/$rt_name" && gone "$rt_coll/$rt_name" &&
	"$KOP_TEST_TOOL" proto-encode <"$rt_file" >body.pb &&
	ksim_curl -o created.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @body.pb "$rt_coll" >code &&
	test_cmp expect code || { cat created.json; return 1; }
	ksim_curl -f "$rt_coll/$rt_name" >pb.out &&
	ksim_curl -f -o /dev/null -X DELETE "$rt_coll/$rt_name?gracePeriodSeconds=0" &&
	test_wait_for 20 gone "$rt_coll/$rt_name" && gone "$rt_coll/$rt_name" &&
	jq -S -f strip.jq json.out >expect.json &&
	jq -S -f strip.jq pb.out >actual.json &&
	test_cmp expect.json actual.json
}

test_expect_success 'every built-in kind in discovery: its example created as protobuf is stored as created as JSON' '
	ksim_curl -f /api >api.json &&
	ksim_curl -f /apis >apis.json &&
	{ echo v1; jq -r ".groups[].versions[].groupVersion" apis.json; } >gvs &&
	: >kinds &&
	while read -r gv; do
		case $gv in v1) base=/api/v1 ;; *) base=/apis/$gv ;; esac
		ksim_curl -f "$base" >res.json &&
		# created, not just reviewed; custom resources take no protobuf (below)
		jq -r --arg base "$base" --arg gv "$gv" ".resources[] | select((.name | contains(\"/\") | not)
			and (.verbs | index(\"create\")) and (.verbs | index(\"get\")))
			| [\$gv, .kind, (if .namespaced then \$base + \"/namespaces/pj/\" else \$base + \"/\" end) + .name] | @tsv" \
			res.json >>kinds || return 1
	done <gvs &&
	grep -q "^apps/v1	Deployment	" kinds &&
	n=0 &&
	while IFS="	" read -r gv kind coll; do
		f=$(example "$kind" "$gv") &&
		test -f "$f" || { echo "no example for $kind $gv: $f"; return 1; }
		roundtrip "$coll" "$f" || { echo "kind $kind $gv"; return 1; }
		n=$((n + 1))
	done <kinds &&
	test "$n" -ge 20
'

test_expect_success 'update (PUT) as protobuf: the stored object is the one a JSON update stores' '
	f=$(example Deployment apps/v1) &&
	jq ".metadata.name = \"upd\"" "$f" >d.json &&
	ksim_curl -f -o created.json -X POST -H "Content-Type: application/json" --data-binary @d.json \
		/apis/apps/v1/namespaces/pj/deployments &&
	rv=$(jq -r .metadata.resourceVersion created.json) &&
	jq --arg rv "$rv" ".metadata.resourceVersion = \$rv | .spec.replicas = 0 | .spec.paused = false
		| .metadata.labels.stage = \"two\"" d.json >d2.json &&
	"$KOP_TEST_TOOL" proto-encode <d2.json >body.pb &&
	ksim_curl -f -o updated.json -X PUT -H "$PB" --data-binary @body.pb /apis/apps/v1/namespaces/pj/deployments/upd &&
	jq -e ".spec.replicas == 0 and (.spec | has(\"paused\") | not) and .metadata.labels.stage == \"two\"
		and .metadata.generation == 2" updated.json &&
	ksim_curl -f /apis/apps/v1/namespaces/pj/deployments/upd >got.json &&
	jq -S -f strip.jq updated.json >expect &&
	jq -S -f strip.jq got.json >actual &&
	test_cmp expect actual &&
	# the status subresource: availableReplicas 0 is not a pointer, so Go (and ksim) leave it out
	jq ".status = {observedGeneration: 2, availableReplicas: 0}" got.json |
	"$KOP_TEST_TOOL" proto-encode >status.pb &&
	ksim_curl -f -o st.json -X PUT -H "$PB" --data-binary @status.pb \
		/apis/apps/v1/namespaces/pj/deployments/upd/status &&
	jq -e ".status.observedGeneration == 2 and (.status | has(\"availableReplicas\") | not)" st.json
'

test_expect_success 'the scale subresource takes a protobuf Scale: replicas 3, then 0 (which Go leaves out)' '
	S=/apis/apps/v1/namespaces/pj/deployments/upd/scale &&
	ksim_curl -f $S >scale.json &&
	jq ".spec.replicas = 3" scale.json | "$KOP_TEST_TOOL" proto-encode >scale.pb &&
	ksim_curl -f -o out.json -X PUT -H "$PB" --data-binary @scale.pb $S &&
	jq -e ".kind == \"Scale\" and .spec.replicas == 3" out.json &&
	ksim_curl -f /apis/apps/v1/namespaces/pj/deployments/upd >got.json &&
	jq -e ".spec.replicas == 3" got.json &&
	jq "del(.metadata.resourceVersion) | .spec.replicas = 0" scale.json | "$KOP_TEST_TOOL" proto-encode >scale.pb &&
	"$KOP_TEST_TOOL" proto-decode <scale.pb >decoded.json &&
	jq -e ".spec == {}" decoded.json &&
	ksim_curl -f -o out.json -X PUT -H "$PB" --data-binary @scale.pb $S &&
	jq -e ".spec.replicas == 0" out.json &&
	ksim_curl -f /apis/apps/v1/namespaces/pj/deployments/upd >got.json &&
	jq -e ".spec.replicas == 0" got.json &&
	"$KOP_TEST_TOOL" proto-encode <"$(example ConfigMap v1)" >cm.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X PUT -H "$PB" --data-binary @cm.pb $S >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -e ".message == \"the kind in the data (ConfigMap) does not match the expected kind (Scale)\"" out.json
'

test_expect_success 'a field of the wrong wire type is a 400 BadRequest naming the field and its offset' '
	# ConfigMap: metadata {name: "x"}, then data (2) as a varint
	printf "k8s\000\012\017\012\002v1\022\011ConfigMap\022\007\012\003\012\001x\020\001" >bad.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @bad.pb /api/v1/namespaces/pj/configmaps >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -e ".kind == \"Status\" and .reason == \"BadRequest\" and .code == 400" out.json &&
	jq -r .message out.json >msg &&
	echo "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: protobuf: data: wrong wire type 0 (want 2) at offset 5" >expect &&
	test_cmp expect msg &&
	gone /api/v1/namespaces/pj/configmaps/x
'

test_expect_success 'a nested field names its path; raw bytes that are not JSON are named too' '
	jq -n "{apiVersion:\"apps/v1\",kind:\"Deployment\",metadata:{name:\"n\"},spec:{template:{spec:{containers:[{name:\"a\"},{name:\"b\",ports:[{containerPort:80}]}]}}}}" |
	"$KOP_TEST_TOOL" proto-encode >ok.pb &&
	"$KOP_TEST_TOOL" proto-decode <ok.pb >/dev/null &&
	# the containerPort varint 80 (0x50) of the second container becomes a length-delimited field
	perl -0777 -pe "s/\x18\x50/\x1a\x50/" ok.pb >bad.pb &&
	! cmp -s ok.pb bad.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @bad.pb /apis/apps/v1/namespaces/pj/deployments >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -r .message out.json >msg &&
	grep "^Deployment in version \"v1\" cannot be handled as a Deployment: protobuf: spec.template.spec.containers\[1\].ports\[0\]" msg &&
	jq -n "{apiVersion:\"apps/v1\",kind:\"ControllerRevision\",metadata:{name:\"r\"},data:{a:1},revision:1}" |
	"$KOP_TEST_TOOL" proto-encode | perl -0777 -pe "s/\{\"a\":1\}/\{\"a\":1\]/" >raw.pb &&
	test_must_fail "$KOP_TEST_TOOL" proto-decode <raw.pb 2>err &&
	grep "protobuf: data: raw bytes that are not JSON at offset" err
'

test_expect_success 'a truncated body, a wrong prefix and an empty body are 400s that say so' '
	"$KOP_TEST_TOOL" proto-encode <"$(example ConfigMap v1)" >ok.pb &&
	size=$(wc -c <ok.pb) &&
	head -c $((size - 3)) ok.pb >cut.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @cut.pb /api/v1/namespaces/pj/configmaps >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -e ".reason == \"BadRequest\" and (.message | test(\"^the object provided is unrecognized \\\\(must be of type ConfigMap\\\\): protobuf: the runtime.Unknown envelope is truncated at offset [0-9]+ \\\\(6b387300\"))" out.json &&
	{ printf "k9s\000"; tail -c +5 ok.pb; } >magic.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @magic.pb /api/v1/namespaces/pj/configmaps >code &&
	test_cmp expect code &&
	jq -e ".message | startswith(\"the object provided is unrecognized (must be of type ConfigMap): the body does not start with the protobuf prefix\")" out.json &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" /api/v1/namespaces/pj/configmaps >code &&
	test_cmp expect code &&
	jq -e ".message | endswith(\"(<empty>)\")" out.json &&
	# a message cut inside the raw object (its length says more than there is)
	printf "k8s\000\012\017\012\002v1\022\011ConfigMap\022\005\012\007\012\001x" >inner.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @inner.pb /api/v1/namespaces/pj/configmaps >code &&
	test_cmp expect code
'

test_expect_success 'a protobuf body of another kind is the 400 a JSON body of it is; an unknown field is skipped' '
	jq -n "{apiVersion:\"v1\",kind:\"Secret\",metadata:{name:\"s\"}}" | "$KOP_TEST_TOOL" proto-encode >secret.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @secret.pb /api/v1/namespaces/pj/configmaps >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -e ".message == \"the kind in the data (Secret) does not match the expected kind (ConfigMap)\"" out.json &&
	printf "k8s\000\012\021\012\002v1\022\013Frobnicator\022\000" >unknown.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @unknown.pb /api/v1/namespaces/pj/configmaps >code &&
	test_cmp expect code &&
	jq -e ".message == \"the kind in the data (Frobnicator) does not match the expected kind (ConfigMap)\"" out.json &&
	# ConfigMap {metadata {name "extra"}, field 99 = "?"}: skipped as Go does
	printf "k8s\000\012\017\012\002v1\022\011ConfigMap\022\015\012\007\012\005extra\232\006\001?" >extra.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @extra.pb /api/v1/namespaces/pj/configmaps >code &&
	echo 201 >expect && test_cmp expect code &&
	jq -e ".metadata.name == \"extra\" and (has(\"data\") | not)" out.json
'

test_expect_success 'custom resources take no protobuf: 415 UnsupportedMediaType, as kube-apiserver answers' '
	cat >crd.json <<-\EOF &&
	{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.pb.example.com"},
	 "spec":{"group":"pb.example.com","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget"},
	 "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}
	EOF
	ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" --data-binary @crd.json \
		/apis/apiextensions.k8s.io/v1/customresourcedefinitions &&
	test_wait_for 10 ksim_curl -f -o /dev/null /apis/pb.example.com/v1/namespaces/pj/widgets &&
	printf "k8s\000\012\034\012\021pb.example.com/v1\022\006Widget\022\000" >cr.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "$PB" --data-binary @cr.pb /apis/pb.example.com/v1/namespaces/pj/widgets >code &&
	echo 415 >expect && test_cmp expect code &&
	jq -e ".reason == \"UnsupportedMediaType\" and .message == \"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml\"" out.json
'

# kubectl 1.33 sends its generators' objects as protobuf, 1.27 as JSON: the stored objects are the same.
test_expect_success 'kubectl 1.33 create (protobuf) stores what kubectl 1.27 create (JSON) stores, for every generator' '
	for ns in k27 k33; do
		ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" \
			-d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}" /api/v1/namespaces || return 1
	done &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout tls.key -out tls.crt \
		-subj /CN=web.example.com -days 1 2>/dev/null &&
	cat >alloc.jq <<-\EOF &&
	del(.metadata.namespace, .spec.clusterIP, .spec.clusterIPs, .spec.ports[]?.nodePort)
	| if .subjects then .subjects |= map(del(.namespace)) else . end
	EOF
	cat >gens <<-\EOF &&
	configmaps cm create configmap cm --from-literal=a=b --from-literal=empty= --from-file=tls.crt
	secrets s create secret generic s --from-literal=a=b --type=example.com/t
	secrets dr create secret docker-registry dr --docker-server=r.example.com --docker-username=u --docker-password=p
	secrets tls create secret tls tls --cert=tls.crt --key=tls.key
	serviceaccounts sa create serviceaccount sa
	deployments.apps d create deployment d --image=nginx --replicas=0 --port=80
	deployments.apps d2 create deployment d2 --image=nginx --image=busybox
	services c create service clusterip c --tcp=80:8080 --tcp=443
	services hl create service clusterip hl --clusterip=None
	services np create service nodeport np --tcp=80:8080
	services lb create service loadbalancer lb --tcp=443:8443
	services e create service externalname e --external-name=x.example.com --tcp=80
	roles.rbac.authorization.k8s.io r create role r --verb=get,list --resource=pods,deployments.apps --resource-name=web
	rolebindings.rbac.authorization.k8s.io rb create rolebinding rb --role=r --user=u --group=g --serviceaccount=default:robot
	EOF
	while read -r res name args; do
		for v in 27 33; do
			eval "K=\$K$v" &&
			eval "timeout 30 \"\$K\" -n k$v $args" >out 2>err || { cat err; echo "kubectl.1.$v $args"; return 1; }
			timeout 30 "$K27" -n "k$v" get "$res" "$name" -o json >"k$v.json" || return 1
		done
		# what ksim allocates: addresses and node ports
		jq -S -f strip.jq k27.json | jq -S -f alloc.jq >expect &&
		jq -S -f strip.jq k33.json | jq -S -f alloc.jq >actual &&
		test_cmp expect actual || { echo "kubectl $args"; return 1; }
	done <gens &&
	for v in 27 33; do
		eval "K=\$K$v" &&
		timeout 30 "$K" create namespace "ns$v" >/dev/null &&
		timeout 30 "$K" create clusterrole "cr$v" --verb=get --resource=nodes --non-resource-url=/metrics >/dev/null &&
		timeout 30 "$K" create clusterrolebinding "crb$v" --clusterrole="cr$v" --user=u >/dev/null &&
		timeout 30 "$K27" get "namespace/ns$v" "clusterrole/cr$v" "clusterrolebinding/crb$v" -o json >"c$v.json" || return 1
	done &&
	jq -S "[.items[] | $(cat strip.jq) | del(.metadata.name, .roleRef.name, .spec)
		| del(.metadata.labels.\"kubernetes.io/metadata.name\")]" c27.json >expect &&
	jq -S "[.items[] | $(cat strip.jq) | del(.metadata.name, .roleRef.name, .spec)
		| del(.metadata.labels.\"kubernetes.io/metadata.name\")]" c33.json >actual &&
	test_cmp expect actual
'

test_expect_success 'kubectl 1.33 replace, apply and scale of built-in kinds work and store what 1.27 stores' '
	for v in 27 33; do
		eval "K=\$K$v" &&
		timeout 30 "$K" -n "k$v" get configmap cm -o json | jq ".data.a = \"replaced\"" >cm.json &&
		timeout 30 "$K" -n "k$v" replace -f cm.json >/dev/null &&
		timeout 30 "$K" -n "k$v" apply -f "$FIXTURES/ConfigMap.v1.json" >/dev/null &&
		timeout 30 "$K" -n "k$v" scale deployment d --replicas=0 >/dev/null &&
		timeout 30 "$K" -n "k$v" set image deployment/d nginx=nginx:2 >/dev/null &&
		timeout 30 "$K27" -n "k$v" get configmap/cm deployment/d configmap/settings -o json >"k$v.json" || return 1
	done &&
	jq -e ".items[0].data.a == \"replaced\" and .items[1].spec.template.spec.containers[0].image == \"nginx:2\"" k33.json &&
	# (kubectl keeps the namespace in its last-applied annotation)
	jq -S "[.items[] | $(cat strip.jq) | del(.metadata.namespace)
		| del(.metadata.annotations.\"kubectl.kubernetes.io/last-applied-configuration\")]" k27.json >expect &&
	jq -S "[.items[] | $(cat strip.jq) | del(.metadata.namespace)
		| del(.metadata.annotations.\"kubectl.kubernetes.io/last-applied-configuration\")]" k33.json >actual &&
	test_cmp expect actual
'

test_expect_success 'a protobuf client keeps Secrets as Helm does: create, update, list and delete' '
	jq -n "{apiVersion:\"v1\",kind:\"Secret\",metadata:{name:\"sh.helm.release.v1.demo.v1\",labels:{owner:\"helm\",name:\"demo\",status:\"deployed\",version:\"1\"}},
		type:\"helm.sh/release.v1\",data:{release:(\"H4sIAAAA\" | @base64)}}" >rel.json &&
	"$KOP_TEST_TOOL" proto-encode <rel.json >rel.pb &&
	ksim_curl -f -o created.json -X POST -H "$PB" --data-binary @rel.pb /api/v1/namespaces/pj/secrets &&
	# creationTimestamp came as Go zero (absent, JSON null): the server sets it as for JSON
	jq -e ".metadata.creationTimestamp | test(\"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$\")" created.json &&
	jq --arg rv "$(jq -r .metadata.resourceVersion created.json)" \
		".metadata.resourceVersion = \$rv | .metadata.labels.status = \"superseded\"" rel.json |
	"$KOP_TEST_TOOL" proto-encode >rel2.pb &&
	ksim_curl -f -o updated.json -X PUT -H "$PB" --data-binary @rel2.pb \
		/api/v1/namespaces/pj/secrets/sh.helm.release.v1.demo.v1 &&
	jq -e ".metadata.labels.status == \"superseded\" and .data.release == (\"H4sIAAAA\" | @base64) and .type == \"helm.sh/release.v1\"" updated.json &&
	ksim_curl -f -H "Accept: application/vnd.kubernetes.protobuf, application/json" \
		"/api/v1/namespaces/pj/secrets?labelSelector=owner%3Dhelm" >list.json &&
	jq -e "[.items[].metadata.name] == [\"sh.helm.release.v1.demo.v1\"]" list.json &&
	# helm uninstall: an empty DeleteOptions as protobuf, in the group version of the resource
	printf "k8s\000\n\023\n\002v1\022\rDeleteOptions\022\000\032\000\"\000" >delopts.pb &&
	ksim_curl -f -o /dev/null -X DELETE -H "$PB" --data-binary @delopts.pb \
		/api/v1/namespaces/pj/secrets/sh.helm.release.v1.demo.v1 &&
	gone /api/v1/namespaces/pj/secrets/sh.helm.release.v1.demo.v1
'

test_expect_success 'a protobuf DeleteOptions is read: its precondition holds the delete back; another kind is a 400' '
	ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" \
		-d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"held\"}}" \
		/api/v1/namespaces/pj/configmaps &&
	echo "{\"apiVersion\":\"meta.k8s.io/v1\",\"kind\":\"DeleteOptions\",\"preconditions\":{\"uid\":\"not-its-uid\"}}" |
	"$KOP_TEST_TOOL" proto-encode >pre.pb &&
	code=$(ksim_curl -o pre.json -w "%{http_code}" -X DELETE -H "$PB" --data-binary @pre.pb \
		/api/v1/namespaces/pj/configmaps/held) &&
	test "$code" = 409 &&
	jq -e ".reason == \"Conflict\" and (.message | test(\"not-its-uid\"))" pre.json &&
	"$KOP_TEST_TOOL" proto-encode <"$(example ConfigMap v1)" >cm.pb &&
	code=$(ksim_curl -o other.json -w "%{http_code}" -X DELETE -H "$PB" --data-binary @cm.pb \
		/api/v1/namespaces/pj/configmaps/held) &&
	test "$code" = 400 &&
	jq -e ".code == 400 and .message == \"the kind in the data (ConfigMap) does not match the expected kind (DeleteOptions)\"" other.json &&
	ksim_curl -f -o /dev/null /api/v1/namespaces/pj/configmaps/held
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
