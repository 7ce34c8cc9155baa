#!/bin/sh
test_description='ksim serves the built-in kinds every cluster serves: discovery, OpenAPI, create, get, list, watch, patch, delete'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

F="$TEST_DIRECTORY/t0710-ksim-builtin-kinds"

# The bare API server: no controller changes what the test writes.
ksim_start --no-simulate
ksim_kubectls

# The resource path of a line of discovery.txt: /api/v1 or /apis/G/V.
gv_path () {
	case "$1" in
	*/*) echo "/apis/$1" ;;
	*) echo "/api/$1" ;;
	esac
}

test_expect_success 'discovery: each kind with its scope, kind, short names, categories and subresources' '
	grep -v "^#" "$F/discovery.txt" >want.txt &&
	while read gv res kind nsd shorts cats subs; do
		ksim_curl -f -o disc.json "$(gv_path $gv)" &&
		jq -e --arg r "$res" --arg k "$kind" --argjson n "$nsd" --arg s "$shorts" --arg c "$cats" "
			[.resources[] | select(.name == \$r)] | length == 1 and
			(.[0] | .kind == \$k and .namespaced == \$n and
				(.shortNames // [] | join(\",\")) == (\$s | sub(\"^-\$\"; \"\")) and
				(.categories // [] | join(\",\")) == (\$c | sub(\"^-\$\"; \"\")) and
				(.verbs | sort) == [\"create\",\"delete\",\"deletecollection\",\"get\",\"list\",\"patch\",\"update\",\"watch\"])" \
			disc.json >/dev/null || { echo "discovery of $gv $res:"; jq ".resources[] | select(.name == \"$res\")" disc.json; exit 1; }
		jq -r --arg r "$res/" "[.resources[].name | select(startswith(\$r)) | ltrimstr(\$r)] | sort | join(\",\")" \
			disc.json >subs.got &&
		echo "$subs" | sed "s/^-\$//" >subs.want &&
		test_cmp subs.want subs.got || exit 1
	done <want.txt
'

test_expect_success 'discovery: the groups and versions, autoscaling preferring v2' '
	ksim_curl -f -o apis.json /apis &&
	for g in batch discovery.k8s.io policy storage.k8s.io scheduling.k8s.io apiregistration.k8s.io; do
		jq -e --arg g $g ".groups[] | select(.name == \$g) | .preferredVersion.version == \"v1\"" apis.json >/dev/null ||
		{ echo "group $g"; exit 1; }
	done &&
	jq -e ".groups[] | select(.name == \"autoscaling\") | [.versions[].version] == [\"v2\", \"v1\"] and
		.preferredVersion.groupVersion == \"autoscaling/v2\"" apis.json
'

test_expect_success 'OpenAPI v3: every group version has its document, with the paths of each kind' '
	ksim_curl -f -o index.json /openapi/v3 &&
	while read gv res kind nsd shorts cats subs; do
		case $gv in */*) key=apis/$gv ;; *) key=api/$gv ;; esac
		url=$(jq -r --arg k "$key" ".paths[\$k].serverRelativeURL" index.json) &&
		ksim_curl -f -o doc.json "$url" &&
		if test "$nsd" = true; then p="/$key/namespaces/{namespace}/$res/{name}"; else p="/$key/$res/{name}"; fi &&
		jq -e --arg p "$p" --arg k "$kind" ".paths[\$p].get[\"x-kubernetes-group-version-kind\"].kind == \$k" doc.json >/dev/null ||
		{ echo "no $p in $url"; exit 1; }
	done <want.txt
'

test_expect_success 'kubectl api-resources lists them' '
	for v in $versions; do
		"$v" api-resources >res.txt 2>err.txt || { cat err.txt; exit 1; }
		# (api-resources shows the preferred version of a group only)
		grep -v "^autoscaling/v1 " want.txt | while read gv res kind nsd shorts cats subs; do
			grep -E "^$res +([a-z,]+ +)?$gv +$nsd +$kind\$" res.txt >/dev/null ||
			{ echo "$v: no $gv $res"; exit 1; }
		done || exit 1
	done
'

# The objects of kinds.yaml, as "resource/name" for kubectl, one a line.
jq_names='select(.kind) | (.kind | ascii_downcase) + "." + (.apiVersion | if test("/") then split("/") | .[1] + "." + .[0] else . + "." end | rtrimstr(".")) + "/" + .metadata.name'

test_expect_success 'every kind: create, get, list, patch, watch, delete with each kubectl' '
	ksim_curl -f -o ns.json /api/v1/namespaces >/dev/null &&
	for v in $versions; do
		n=kinds-$(basename $v | tr . -) &&
		echo "{\"metadata\":{\"name\":\"$n\"}}" | ksim_curl -sf -o /dev/null -H "Content-Type: application/json" -d @- /api/v1/namespaces &&
		rv=$(ksim_curl -f /api/v1/namespaces | jq -r .metadata.resourceVersion) &&
		pids= &&
		while read gv res kind nsd shorts cats subs; do
			if test "$nsd" = true; then w="$(gv_path $gv)/namespaces/$n/$res"; else w="$(gv_path $gv)/$res"; fi
			ksim_curl -sN -o "watch.$res.$(echo $gv | tr / _)" "$w?watch=true&resourceVersion=$rv&timeoutSeconds=60" &
			pids="$pids $!"
		done <want.txt &&
		# cluster-scoped objects are named per kubectl, so both runs create their own
		sed "s/^  name: \\(.*\\)\$/  name: \\1-$n/" "$F/kinds.yaml" >kinds.yaml &&
		# kubectl 1.32 and later send the creates as protobuf, older ones as JSON
		"$v" -n $n create -f kinds.yaml >created.txt 2>err.txt || { cat err.txt; exit 1; }
		test $(wc -l <created.txt) -eq $(grep -c "^kind:" kinds.yaml) &&
		"$v" -n $n get -f kinds.yaml -o json >got.json &&
		jq -e "[.items[] | .metadata.uid | length > 0] | length == $(grep -c "^kind:" kinds.yaml) and all" got.json >/dev/null &&
		while read gv res kind nsd shorts cats subs; do
			case $gv in */*) r=$res.${gv#*/}.${gv%/*} ;; *) r=$res ;; esac
			"$v" -n $n get $r -o json >list.json &&
			jq -e --arg k "$kind" ".items | length >= 1 and (map(.kind == \$k) | all)" list.json >/dev/null ||
			{ echo "$v: list of $gv $res"; cat list.json; exit 1; }
		done <want.txt &&
		"$v" -n $n label -f kinds.yaml checked=yes >labelled.txt 2>err.txt || { cat err.txt; exit 1; }
		"$v" -n $n patch -f kinds.yaml --type merge -p "{\"metadata\":{\"annotations\":{\"patched\":\"$n\"}}}" >/dev/null 2>err.txt ||
		{ cat err.txt; exit 1; }
		"$v" -n $n get -f kinds.yaml -o json >got.json &&
		jq -e --arg n $n "[.items[] | .metadata.labels.checked == \"yes\" and .metadata.annotations.patched == \$n] | all" got.json >/dev/null &&
		"$v" -n $n delete -f kinds.yaml --wait=false >/dev/null 2>err.txt || { cat err.txt; exit 1; }
		"$v" -n $n get -f kinds.yaml --ignore-not-found -o name >left.txt &&
		! test -s left.txt &&
		# each watch saw its objects added, modified and deleted
		i=0 &&
		while test $i -lt 50; do
			all=1
			for f in watch.*; do
				grep -q "\"type\":\"DELETED\"" $f || all=
			done
			test -n "$all" && break
			sleep 0.1
			i=$((i + 1))
		done &&
		for f in watch.*; do
			grep -q "\"type\":\"ADDED\"" $f && grep -q "\"type\":\"MODIFIED\"" $f && grep -q "\"type\":\"DELETED\"" $f ||
			{ echo "$v: $f"; cat $f; exit 1; }
		done &&
		kill $pids 2>/dev/null; rm -f watch.* || exit 1
	done
'

test_expect_success 'create fills in what a real server does: status replicas 0, Job selector, pod defaults in templates' '
	kubectl create namespace defaults >/dev/null &&
	kubectl -n defaults create -f "$F/kinds.yaml" >/dev/null 2>err.txt &&
	kubectl -n defaults get rc k-rc -o json >rc.json &&
	jq -e ".status == {replicas: 0} and .spec.selector == {app: \"k-rc\"} and .metadata.labels == {app: \"k-rc\"}" rc.json &&
	kubectl -n defaults get ds k-ds -o json >ds.json &&
	jq -e ".status == {currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0} and
		.spec.updateStrategy.type == \"RollingUpdate\" and .spec.revisionHistoryLimit == 10 and
		.spec.template.spec.containers[0].imagePullPolicy == \"IfNotPresent\" and
		.spec.template.spec.dnsPolicy == \"ClusterFirst\"" ds.json &&
	kubectl -n defaults get job k-job -o json >job.json &&
	jq -e ".metadata.uid as \$u | .spec.selector.matchLabels == {\"batch.kubernetes.io/controller-uid\": \$u} and
		.spec.template.metadata.labels[\"job-name\"] == \"k-job\" and .spec.completions == 1 and
		.spec.backoffLimit == 6 and .spec.manualSelector == false and .spec.podReplacementPolicy == \"TerminatingOrFailed\" and
		.status == {}" job.json &&
	kubectl -n defaults get pdb k-pdb -o json >pdb.json &&
	jq -e ".status == {disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0}" pdb.json &&
	kubectl get pv k-pv -o json >pv.json &&
	jq -e ".status.phase == \"Pending\" and .spec.persistentVolumeReclaimPolicy == \"Retain\"" pv.json &&
	kubectl get sc k-sc -o json >sc.json &&
	jq -e ".reclaimPolicy == \"Delete\" and .volumeBindingMode == \"Immediate\"" sc.json
'

test_expect_success 'the scale subresource of a ReplicationController' '
	kubectl -n defaults scale rc k-rc --replicas=2 >/dev/null &&
	ksim_curl -f -o scale.json /api/v1/namespaces/defaults/replicationcontrollers/k-rc/scale &&
	jq -e ".kind == \"Scale\" and .spec.replicas == 2 and .status.selector == \"app=k-rc\"" scale.json
'

test_expect_success 'a HorizontalPodAutoscaler reads the same through autoscaling/v1 and v2' '
	ksim_curl -f -o h1.json /apis/autoscaling/v2/namespaces/defaults/horizontalpodautoscalers/k-hpa1 &&
	jq -e ".apiVersion == \"autoscaling/v2\" and .spec.metrics == [{type: \"Resource\", resource: {name: \"cpu\",
		target: {type: \"Utilization\", averageUtilization: 50}}}] and (.spec | has(\"targetCPUUtilizationPercentage\") | not)" h1.json &&
	ksim_curl -f -o h2.json /apis/autoscaling/v1/namespaces/defaults/horizontalpodautoscalers/k-hpa2 &&
	jq -e ".apiVersion == \"autoscaling/v1\" and .spec.targetCPUUtilizationPercentage == 50 and (.spec | has(\"metrics\") | not)" h2.json
'

ksim_stop

test_done
