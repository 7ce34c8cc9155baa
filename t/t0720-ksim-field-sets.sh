#!/bin/sh
test_description='ksim: managedFields field sets kept once (lib/ssa_intern.c): shared by objects written alike, let go when nothing holds them, made again'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

NS=/api/v1/namespaces/default

TOK=t0720-token

# Each managedFields entry of the last answer (ksim_code's body.json) as [manager, fieldsV1], keys in their order.
mf () {
	jq -c ".metadata.managedFields | map([.manager, .fieldsV1])" body.json
}

# bulk POST|DELETE PREFIX FROM TO: the ConfigMaps PREFIX<i>, FROM <= i <= TO, each
# with a data key of its own (so sets of their own) and the label bulk=PREFIX, made
# (by manager a) or deleted by one curl; every answer 201 or 200.
bulk () {
	bk_i=$3
	while test "$bk_i" -le "$4"
	do
		test "$bk_i" = "$3" || echo next
		if test "$1" = POST
		then
			printf 'url = "%s%s/configmaps?fieldManager=a"\nrequest = "POST"\n' "$KSIM_URL" "$NS"
			printf 'header = "Content-Type: application/json"\n'
			printf 'data = "{\\"metadata\\":{\\"name\\":\\"%s%d\\",\\"labels\\":{\\"bulk\\":\\"%s\\"}},\\"data\\":{\\"%s%d\\":\\"v\\"}}"\n' \
				"$2" "$bk_i" "$2" "$2" "$bk_i"
		else
			printf 'url = "%s%s/configmaps/%s%d"\nrequest = "DELETE"\n' "$KSIM_URL" "$NS" "$2" "$bk_i"
		fi
		printf 'insecure\nheader = "Authorization: Bearer %s"\n' "$KSIM_TOKEN"
		printf 'output = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n'
		bk_i=$((bk_i + 1))
	done >bulk.cfg
	curl -sS -m 120 -K bulk.cfg >bulk.codes &&
	test "$(grep -c -v -E "^(200|201)$" bulk.codes)" = 0 &&
	test "$(wc -l <bulk.codes)" = $(($4 - $3 + 1))
}

# A short history: an object deleted is soon held by nothing but the table of sets.
ksim_start --history 20 --token $TOK

# Objects written alike share their sets' storage: a write that changes one
# object's sets leaves the others' as they were.
test_expect_success 'field sets written alike stay apart when one object changes' '
	for n in s1 s2 s3
	do
		ksim_expect_code 201 $TOK POST "$NS/configmaps?fieldManager=a" \
			"{\"metadata\":{\"name\":\"$n\",\"labels\":{\"l\":\"v\"}},\"data\":{\"a\":\"1\",\"b\":\"2\"}}" || return 1
	done &&
	ksim_expect_code 200 $TOK PATCH "$NS/configmaps/s2?fieldManager=b" \
		"{\"data\":{\"a\":\"9\"},\"metadata\":{\"labels\":{\"m\":\"x\"}}}" && mf >actual &&
	ksim_expect_code 200 $TOK PUT "$NS/configmaps/s3?fieldManager=c" \
		"{\"metadata\":{\"name\":\"s3\",\"labels\":{\"l\":\"v\"}},\"data\":{\"a\":\"1\"}}" && mf >>actual &&
	ksim_expect_code 200 $TOK GET $NS/configmaps/s1 && mf >>actual &&
	cat >expect <<-\EOT &&
	[["a",{"f:data":{".":{},"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:l":{}}}}],["b",{"f:data":{"f:a":{}},"f:metadata":{"f:labels":{"f:m":{}}}}]]
	[["a",{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:l":{}}}}]]
	[["a",{"f:data":{".":{},"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:l":{}}}}]]
	EOT
	test_cmp expect actual
'

# 600 ConfigMaps of sets of their own (two new nodes each) outgrow the table
# (1,024 slots, half full at most); deleted, and pushed out of the history,
# their nodes are held by the table alone, and the next 600 let them go. What
# is stored stays what was written throughout.
expect_bulk () { # PREFIX COUNT: COUNT ConfigMaps of label bulk=PREFIX, each with the sets it was written with
	ksim_curl "$NS/configmaps?labelSelector=bulk=$1" >list.json &&
	jq -e "[.items[] | .metadata.name as \$n | .metadata.managedFields
		| map([.manager, .fieldsV1]) == [[\"a\", {\"f:data\": {\".\": {}, (\"f:\" + \$n): {}},
			\"f:metadata\": {\"f:labels\": {\".\": {}, \"f:bulk\": {}}}}]]] | length == (\$c | tonumber) and all" --arg c "$2" list.json
}

test_expect_success 'field sets outgrow the table, are let go once nothing holds them, and are made again' '
	bulk POST p 1 600 && expect_bulk p 600 &&
	bulk DELETE p 1 600 &&
	bulk POST q 1 600 && expect_bulk q 600 &&
	bulk DELETE q 1 300 &&
	bulk POST p 1 600 && expect_bulk p 600 && expect_bulk q 300 &&
	ksim_expect_code 200 $TOK GET $NS/configmaps/s1 && mf >actual &&
	tail -n 1 expect >expect.s1 &&
	test_cmp expect.s1 actual
'

# A map's or list's set is looked up by its shape (lib/ssa_shape.c): its keys,
# its list elements' keys and its null members, in one mode. pod NAME SPEC: a
# Pod of that spec created by manager a; spec_set: the f:spec of the last
# answer's first entry.
pod () {
	ksim_expect_code 201 $TOK POST "$NS/pods?fieldManager=a" "{\"metadata\":{\"name\":\"$1\"},\"spec\":$2}"
}
spec_set () {
	jq -c ".metadata.managedFields[0].fieldsV1[\"f:spec\"]" body.json
}
containers () { # the keys of the last answer's first entry's f:spec.f:containers
	jq -c ".metadata.managedFields[0].fieldsV1[\"f:spec\"][\"f:containers\"] | keys" body.json
}

test_expect_success 'a set kept by its shape: another list key, member or mode is another set' '
	pod x1 "{\"containers\":[{\"name\":\"x\",\"image\":\"i:1\",\"ports\":[{\"containerPort\":80}]}]}" &&
	spec_set >x1.set && containers >actual &&
	echo "[\".\",\"k:{\\\"name\\\":\\\"x\\\"}\"]" >expect && test_cmp expect actual &&
	# (other scalars, the same shape: the same set)
	pod x2 "{\"containers\":[{\"name\":\"x\",\"image\":\"i:2\",\"ports\":[{\"containerPort\":80}]}]}" &&
	spec_set >x2.set && test_cmp x1.set x2.set &&
	# (another container name, another port, another member: each its own)
	pod y1 "{\"containers\":[{\"name\":\"y\",\"image\":\"i:1\",\"ports\":[{\"containerPort\":80}]}]}" &&
	containers >actual &&
	echo "[\".\",\"k:{\\\"name\\\":\\\"y\\\"}\"]" >expect && test_cmp expect actual &&
	pod x3 "{\"containers\":[{\"name\":\"x\",\"image\":\"i:1\",\"ports\":[{\"containerPort\":81}]}]}" &&
	jq -c ".metadata.managedFields[0].fieldsV1[\"f:spec\"][\"f:containers\"] | del(.[\".\"])[] | .[\"f:ports\"] | keys" body.json >actual &&
	echo "[\".\",\"k:{\\\"containerPort\\\":81,\\\"protocol\\\":\\\"TCP\\\"}\"]" >expect && test_cmp expect actual &&
	pod x4 "{\"hostname\":\"h\",\"containers\":[{\"name\":\"x\",\"image\":\"i:1\",\"ports\":[{\"containerPort\":80}]}]}" &&
	jq -e ".metadata.managedFields[0].fieldsV1[\"f:spec\"] | has(\"f:hostname\")" body.json &&
	pod x6 "{\"subdomain\":\"s\",\"containers\":[{\"name\":\"x\",\"image\":\"i:1\",\"ports\":[{\"containerPort\":80}]}]}" &&
	jq -e ".metadata.managedFields[0].fieldsV1[\"f:spec\"] | has(\"f:subdomain\") and (has(\"f:hostname\") | not)" body.json &&
	# (one shape applied, then created: an apply marks no map itself, a create does)
	ksim_expect_code 201 $TOK PATCH "$NS/configmaps/m1?fieldManager=b" \
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"m1\"},\"data\":{\"a\":\"1\"}}" \
		application/apply-patch+yaml &&
	jq -c ".metadata.managedFields[0].fieldsV1[\"f:data\"]" body.json >actual &&
	echo "{\"f:a\":{}}" >expect && test_cmp expect actual &&
	ksim_expect_code 201 $TOK POST "$NS/configmaps?fieldManager=a" "{\"metadata\":{\"name\":\"m2\"},\"data\":{\"a\":\"2\"}}" &&
	jq -c ".metadata.managedFields[0].fieldsV1[\"f:data\"]" body.json >actual &&
	echo "{\".\":{},\"f:a\":{}}" >expect && test_cmp expect actual
'

# widgets LISTTYPE: the Widget CRD, its spec.items a list of that x-kubernetes-list-type (map: by name)
widgets () {
	jq -n -c --arg t "$1" "{apiVersion: \"apiextensions.k8s.io/v1\", kind: \"CustomResourceDefinition\",
		metadata: {name: \"widgets.t0720.example.com\"},
		spec: {group: \"t0720.example.com\", scope: \"Namespaced\", names: {plural: \"widgets\", kind: \"Widget\"},
		       versions: [{name: \"v1\", served: true, storage: true, schema: {openAPIV3Schema: {type: \"object\",
			properties: {spec: {type: \"object\", properties: {items: ({type: \"array\",
				items: {type: \"object\", properties: {name: {type: \"string\"}}, required: [\"name\"]},
				\"x-kubernetes-list-type\": \$t} + if \$t == \"map\" then {\"x-kubernetes-list-map-keys\": [\"name\"]}
									 else {} end)}}}}}}]}}"
}
W=/apis/t0720.example.com/v1/namespaces/default/widgets

test_expect_success 'a manager that writes again what it owns keeps its set; one that adds or drops a field, not' '
	ksim_expect_code 201 $TOK POST "$NS/configmaps?fieldManager=a" "{\"metadata\":{\"name\":\"r1\"},\"data\":{\"a\":\"1\",\"b\":\"2\"}}" &&
	ksim_expect_code 200 $TOK PUT "$NS/configmaps/r1?fieldManager=a" "{\"metadata\":{\"name\":\"r1\"},\"data\":{\"a\":\"3\",\"b\":\"4\"}}" &&
	mf >actual &&
	ksim_expect_code 200 $TOK PUT "$NS/configmaps/r1?fieldManager=a" "{\"metadata\":{\"name\":\"r1\"},\"data\":{\"a\":\"3\"}}" &&
	mf >>actual &&
	ksim_expect_code 200 $TOK PUT "$NS/configmaps/r1?fieldManager=a" "{\"metadata\":{\"name\":\"r1\"},\"data\":{\"a\":\"3\",\"c\":\"5\"}}" &&
	mf >>actual &&
	cat >expect <<-\EOT &&
	[["a",{"f:data":{".":{},"f:a":{},"f:b":{}}}]]
	[["a",{"f:data":{".":{},"f:a":{}}}]]
	[["a",{"f:data":{".":{},"f:a":{},"f:c":{}}}]]
	EOT
	test_cmp expect actual
'

# A set a client sends is stored as kube-apiserver decodes and encodes it: a member with
# nothing below it is {}, never {".":{}}.
test_expect_success 'a set a client sends is stored in its canonical form' '
	ksim_expect_code 201 $TOK POST "$NS/configmaps?fieldManager=a" "{\"metadata\":{\"name\":\"c1\"},\"data\":{\"a\":\"1\"}}" &&
	ksim_expect_code 200 $TOK PATCH "$NS/configmaps/c1?fieldManager=a" "{\"metadata\":{\"labels\":{\"l\":\"1\"},\"managedFields\":[{\"manager\":\"x\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:data\":{\".\":{},\"f:a\":{\".\":{}}}}}]}}" &&
	jq -c ".metadata.managedFields | map(select(.manager == \"x\"))[0].fieldsV1" body.json >actual &&
	echo "{\"f:data\":{\".\":{},\"f:a\":{}}}" >expect &&
	test_cmp expect actual
'

test_expect_success 'a set kept by its shape is not one of a schema since changed' '
	CRD=/apis/apiextensions.k8s.io/v1/customresourcedefinitions &&
	ksim_expect_code 201 $TOK POST $CRD "$(widgets map)" &&
	test_wait_for 10 eval "test \"\$(ksim_code $TOK GET $W)\" = 200" && ksim_expect_code 200 $TOK GET $W &&
	ksim_expect_code 201 $TOK POST "$W?fieldManager=a" \
		"{\"apiVersion\":\"t0720.example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w1\"},\"spec\":{\"items\":[{\"name\":\"a\"}]}}" &&
	jq -c ".metadata.managedFields[0].fieldsV1[\"f:spec\"][\"f:items\"] | keys" body.json >actual &&
	echo "[\".\",\"k:{\\\"name\\\":\\\"a\\\"}\"]" >expect && test_cmp expect actual &&
	ksim_expect_code 200 $TOK GET $CRD/widgets.t0720.example.com &&
	jq -c ".spec.versions[0].schema = $(widgets atomic | jq -c ".spec.versions[0].schema")" body.json >atomic.json &&
	ksim_expect_code 200 $TOK PUT $CRD/widgets.t0720.example.com "$(cat atomic.json)" &&
	ksim_expect_code 201 $TOK POST "$W?fieldManager=a" \
		"{\"apiVersion\":\"t0720.example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w2\"},\"spec\":{\"items\":[{\"name\":\"a\"}]}}" &&
	jq -c ".metadata.managedFields[0].fieldsV1[\"f:spec\"][\"f:items\"]" body.json >actual &&
	echo "{}" >expect && test_cmp expect actual
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
