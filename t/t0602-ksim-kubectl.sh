#!/bin/sh
test_description='ksim: real kubectl (1.27, 1.33 and the default one) with no special flags'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_kubectls

# kubectl with a bound on its run time.
k () {
	timeout 30 "$KUBECTL" "$@"
}

for KUBECTL in $versions; do
	export KUBECTL
	V=$(basename "$KUBECTL")
	ksim_start
	rm -rf "$KUBECACHEDIR"

	test_expect_success "$V: apply a CRD (client-side); it is Established at once" '
		k apply -f "$FIXTURES/crd.yaml" >out &&
		grep "customresourcedefinition.apiextensions.k8s.io/widgets.test.example.org created" out &&
		k wait --for=condition=Established crd/widgets.test.example.org --timeout=10s &&
		k get crd widgets.test.example.org -o json >crd.json &&
		jq -e ".status.acceptedNames.kind == \"Widget\" and .status.storedVersions == [\"v1\"]" crd.json
	'

	test_expect_success "$V: apply a custom object (client-side): created, unchanged, configured" '
		k apply -f "$FIXTURES/widget.yaml" >out1 &&
		grep "widget.test.example.org/w1 created" out1 &&
		k apply -f "$FIXTURES/widget.yaml" >out2 &&
		grep "widget.test.example.org/w1 unchanged" out2 &&
		sed "s/red/green/" "$FIXTURES/widget.yaml" >green.yaml &&
		k apply -f green.yaml >out3 &&
		grep "widget.test.example.org/w1 configured" out3 &&
		k get widget w1 -o json >w1.json &&
		jq -e ".spec == {color: \"green\", size: 3} and .metadata.generation == 2" w1.json
	'

	test_expect_success "$V: get prints the printer columns (table from the server)" '
		k get wd >table &&
		head -n 1 table >header &&
		grep "^NAME  *COLOR  *PHASE$" header &&
		grep "^w1  *green *$" table
	'

	test_expect_success "$V: apply --server-side a custom object and a Deployment" '
		k apply --server-side -f "$FIXTURES/widget-ssa.yaml" >out &&
		grep "widget.test.example.org/w2 serverside-applied" out &&
		k get wd w2 -o json >w2.json &&
		jq -e ".spec == {color: \"blue\", size: 7}" w2.json &&
		ksim_curl -o w2raw.json /apis/test.example.org/v1/namespaces/default/widgets/w2 &&
		jq -e "[.metadata.managedFields[] | select(.manager == \"kubectl\" and .operation == \"Apply\")] | length == 1" w2raw.json &&
		k apply --server-side -f "$FIXTURES/deployment.yaml" >out &&
		grep "deployment.apps/web serverside-applied" out &&
		k get deploy web -o json >web.json &&
		jq -e ".spec.replicas == 2 and .metadata.generation == 1 and .spec.template.spec.containers[0].image == \"nginx:1.25\"" web.json &&
		k get deploy >deploys &&
		grep "^NAME  *READY  *UP-TO-DATE  *AVAILABLE  *AGE$" deploys &&
		grep -E "^web +[0-2]/2 +[0-2] +[0-2] " deploys
	'

	test_expect_success "$V: apply (client-side) a Deployment, then again --server-side" '
		sed "s/name: web/name: api/" "$FIXTURES/deployment.yaml" >api.yaml &&
		k apply -f api.yaml >out &&
		grep "deployment.apps/api created" out &&
		sed "s/replicas: 2/replicas: 4/" api.yaml >api4.yaml &&
		k apply --server-side -f api4.yaml >out &&
		k get deploy api -o json >api.json &&
		jq -e ".spec.replicas == 4 and .metadata.labels.app == \"web\"" api.json &&
		jq -e ".spec.template.spec.containers[0].name == \"nginx\"" api.json
	'

	test_expect_success "$V: scale a Deployment (scale subresource)" '
		k scale deploy web --replicas=3 >out &&
		grep "deployment.apps/web scaled" out &&
		k get deploy web -o json >web.json &&
		jq -e ".spec.replicas == 3" web.json
	'

	test_expect_success "$V: get -o wide shows the wide columns (priority 1) of built-ins and CRDs" '
		k get deploy web -o wide >wide &&
		grep "^NAME  *READY  *UP-TO-DATE  *AVAILABLE  *AGE  *CONTAINERS  *IMAGES  *SELECTOR$" wide &&
		grep -E "^web +[0-3]/3 +[0-3] +[0-3] +[0-9a-z]+ +nginx +nginx:1.25 +app=web$" wide &&
		test_wait_for 10 sh -c "\"$KUBECTL\" get pods -l app=web --field-selector status.phase=Running -o name | grep -q ." &&
		k get pods -l app=web -o wide >wide &&
		grep "^NAME  *READY  *STATUS  *RESTARTS  *AGE  *IP  *NODE  *NOMINATED NODE  *READINESS GATES$" wide &&
		grep -E "^web-[a-z0-9]+-[a-z0-9]+ +[0-9]/1 +Running +0 +[0-9a-z]+ +[0-9.]+ +ksim-node +<none> +<none>$" wide &&
		printf "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {tier: front, app: web}, ports: [{port: 80}]}\n" >svc.yaml &&
		k apply -f svc.yaml &&
		k get svc web -o wide >wide &&
		grep "^NAME  *TYPE  *CLUSTER-IP  *EXTERNAL-IP  *PORT(S)  *AGE  *SELECTOR$" wide &&
		grep -E "^web +ClusterIP +10[0-9.]+ +<none> +80/TCP +[0-9a-z]+ +app=web,tier=front$" wide &&
		k get nodes -o wide >wide &&
		grep "^NAME  *STATUS  *ROLES  *AGE  *VERSION  *INTERNAL-IP  *EXTERNAL-IP  *OS-IMAGE  *KERNEL-VERSION  *CONTAINER-RUNTIME$" wide &&
		k get wd -o wide >wide &&
		grep "^NAME  *COLOR  *PHASE  *SIZE$" wide &&
		grep -E "^w1 +green +3$" wide
	'

	test_expect_success "$V: explain a custom resource (its schema in the OpenAPI v3 document)" '
		k explain widgets >out &&
		grep "^KIND: *Widget$" out &&
		grep -E "^  spec\s+<Object>$" out &&
		grep -E "^  metadata\s+<ObjectMeta>$" out &&
		k explain widgets.spec.size >out &&
		grep -E "^FIELD: *size <integer>$" out &&
		k explain widgets.metadata.name >out &&
		grep "^FIELD: *name <string>$" out &&
		k explain widgets.status --recursive >out &&
		grep -E "^    reason\s+<string>$" out
	'

	test_expect_success "$V: get -o json of a list" '
		k get wd -o json >list.json &&
		jq -e ".kind == \"List\" or .kind == \"WidgetList\"" list.json &&
		jq -e "[.items[].metadata.name] == [\"w1\", \"w2\"]" list.json
	'

	test_expect_success "$V: patch --subresource=status, then wait --for=condition" '
		k patch wd w1 --subresource=status --type=merge \
			-p "{\"status\":{\"phase\":\"Ready\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}" >out &&
		k wait --for=condition=Ready wd/w1 --timeout=10s >out &&
		grep "condition met" out &&
		k get wd w1 -o json >w1.json &&
		jq -e ".status.phase == \"Ready\" and .metadata.generation == 2" w1.json &&
		k get wd >table &&
		grep "^w1  *green  *Ready *$" table
	'

	test_expect_success "$V: the main resource keeps the stored status" '
		k patch wd w1 --type=merge -p "{\"status\":{\"phase\":\"Ignored\"}}" >out &&
		k get wd w1 -o json >w1.json &&
		jq -e ".status.phase == \"Ready\"" w1.json
	'

	test_expect_success "$V: get -w --output-watch-events -o json sees ADDED, MODIFIED, DELETED" '
		rm -f watch.out &&
		{ timeout 20 "$KUBECTL" get wd -w --output-watch-events -o json >watch.out 2>watch.err & } &&
		wpid=$! &&
		test_wait_for 10 grep -q "\"name\":\"w2\"" watch.out &&
		k patch wd w2 --type=merge -p "{\"spec\":{\"size\":8}}" &&
		k delete wd w2 &&
		test_wait_for 10 grep -q DELETED watch.out &&
		{ kill $wpid; wait $wpid; true; } &&
		jq -r "[.type, .object.metadata.name] | join(\" \")" watch.out >events &&
		cat >expect <<-\EOF_ &&
		ADDED w1
		ADDED w2
		MODIFIED w2
		DELETED w2
		EOF_
		test_cmp expect events
	'

	test_expect_success "$V: delete waits for a finalizer to be removed" '
		k patch wd w1 --type=merge -p "{\"metadata\":{\"finalizers\":[\"test.example.org/hold\"]}}" &&
		rm -f del.out &&
		{ timeout 20 "$KUBECTL" delete wd w1 >del.out 2>&1 & } &&
		dpid=$! &&
		test_wait_for 10 sh -c "k=\$(\"$KUBECTL\" get wd w1 -o jsonpath=\"{.metadata.deletionTimestamp}\") && test -n \"\$k\"" &&
		sleep 1 &&
		kill -0 $dpid &&
		k get wd w1 -o json >w1.json &&
		jq -e ".metadata.finalizers == [\"test.example.org/hold\"] and .metadata.generation == 3" w1.json &&
		k patch wd w1 --type=json -p "[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]" &&
		wait $dpid &&
		grep "deleted" del.out &&
		test_must_fail k get wd w1 2>err &&
		grep NotFound err
	'

	test_expect_success "$V: delete namespace cascades to its contents" '
		k apply -f "$FIXTURES/namespace.yaml" >out &&
		grep "namespace/doomed created" out &&
		k get ns doomed -o json >ns.json &&
		jq -e ".spec.finalizers == [\"kubernetes\"] and .status.phase == \"Active\"" ns.json &&
		k delete ns doomed >out &&
		grep "namespace \"doomed\" deleted" out &&
		test_must_fail k get ns doomed 2>err &&
		grep NotFound err &&
		k get cm,wd -n doomed -o name >left &&
		test ! -s left
	'

	test_expect_success "$V: a Secret: stringData is merged into data, never stored" '
		printf "apiVersion: v1\nkind: Secret\nmetadata: {name: sd, namespace: default}\nstringData: {password: X1}\ndata: {other: b3RoZXI=}\n" >sd.yaml &&
		k apply -f sd.yaml &&
		printf "apiVersion: v1\nkind: Secret\nmetadata: {name: sd2, namespace: default}\nstringData: {password: X2}\n" >sd2.yaml &&
		k apply --server-side -f sd2.yaml &&
		k patch secret sd2 --type merge -p "{\"stringData\":{\"more\":\"m\"}}" &&
		k get secret sd sd2 -o json >sd.json &&
		jq -c "[.items[] | [.data, has(\"stringData\")]]" sd.json >actual &&
		echo "[[{\"other\":\"b3RoZXI=\",\"password\":\"WDE=\"},false],[{\"more\":\"bQ==\",\"password\":\"WDI=\"},false]]" >expect &&
		test_cmp expect actual
	'

	test_expect_success "$V: default namespaces cannot be deleted" '
		test_must_fail k delete ns default 2>err &&
		grep "forbidden: this namespace may not be deleted" err
	'

	test_expect_success "$V: ksim stops cleanly" '
		ksim_stop
	'
done

test_done
