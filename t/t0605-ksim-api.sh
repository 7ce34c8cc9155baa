#!/bin/sh
test_description='ksim: API semantics (dry run, names, selectors, paging, deletion, GC, leases, events, CRDs, status, tables, TLS)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

NS=/api/v1/namespaces/default

# method path body [content-type]: the answer in out.json, the code in code.
req () {
	ksim_curl -o out.json -w "%{http_code}\n" -X "$1" -H "Content-Type: ${4:-application/json}" ${3:+-d "$3"} "$2" >code
}

code_is () {
	echo "$1" >expect.code && test_cmp expect.code code
}

ksim_start

test_expect_success 'dryRun=All: the answer of a create, nothing stored, no RV used' '
	rv=$(ksim_curl $NS/configmaps | jq -r .metadata.resourceVersion) &&
	req POST "$NS/configmaps?dryRun=All" "{\"metadata\":{\"name\":\"dry\"},\"data\":{\"a\":\"b\"}}" &&
	code_is 201 && jq -e ".metadata.name == \"dry\" and .metadata.uid" out.json &&
	req GET $NS/configmaps/dry && code_is 404 &&
	test "$(ksim_curl $NS/configmaps | jq -r .metadata.resourceVersion)" = "$rv" &&
	req POST "$NS/configmaps?dryRun=Some" "{\"metadata\":{\"name\":\"dry\"}}" &&
	code_is 422
'

# managedFields a client sends (a PUT with no other change) are stored as
# kube-apiserver stores what it decodes, each set in its order, and stay so
# through later writes that do not touch them; ones that do not decode (a
# set holding a number) are taken as not sent (decodeLiveOrNew), and no
# later write trips over them. Key order matters: jq -c, not -S.
test_expect_success 'managedFields sent by a client: stored in order; what does not decode is not taken' '
	mf () { jq -c ".metadata.managedFields | map([.manager, .fieldsV1])" out.json; } &&
	req POST "$NS/configmaps?fieldManager=a" "{\"metadata\":{\"name\":\"mf\"},\"data\":{\"a\":\"1\",\"b\":\"2\"}}" &&
	code_is 201 &&
	jq -c ".metadata.managedFields[0].fieldsV1 = {\"f:data\":{\"f:b\":{},\"f:a\":{}}}" out.json >put.json &&
	req PUT "$NS/configmaps/mf?fieldManager=a" "$(cat put.json)" && code_is 200 && mf >actual &&
	req PATCH "$NS/configmaps/mf?fieldManager=b" "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}" \
		application/merge-patch+json && code_is 200 && mf >>actual &&
	jq -c ".metadata.managedFields[0].fieldsV1 = {\"f:data\":{\"f:b\":1}}" out.json >put.json &&
	req PUT "$NS/configmaps/mf?fieldManager=a" "$(cat put.json)" && code_is 200 && mf >>actual &&
	req PATCH "$NS/configmaps/mf?fieldManager=b" "{\"data\":{\"b\":\"3\"}}" application/merge-patch+json &&
	code_is 200 && mf >>actual &&
	cat >expect <<-\EOT &&
	[["a",{"f:data":{"f:a":{},"f:b":{}}}]]
	[["a",{"f:data":{"f:a":{},"f:b":{}}}],["b",{"f:metadata":{"f:labels":{".":{},"f:x":{}}}}]]
	[["a",{"f:data":{"f:a":{},"f:b":{}}}],["b",{"f:metadata":{"f:labels":{".":{},"f:x":{}}}}]]
	[["a",{"f:data":{"f:a":{}}}],["b",{"f:data":{"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}]]
	EOT
	test_cmp expect actual
'

test_expect_success 'a read at a resourceVersion newer than any is 504 ResourceVersionTooLarge (list and get)' '
	rv=$(ksim_curl $NS/configmaps | jq -r .metadata.resourceVersion) &&
	far=$((rv + 1000)) &&
	req GET "$NS/configmaps?resourceVersion=$far" && code_is 504 &&
	jq -c . out.json >actual &&
	cat >expect <<-EOT &&
	{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: $far, current: $rv","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}
	EOT
	test_cmp expect actual &&
	req GET "$NS/configmaps?resourceVersion=$far&resourceVersionMatch=NotOlderThan" && code_is 504 &&
	req GET "/api/v1/namespaces/default?resourceVersion=$far" && code_is 504 &&
	req GET "$NS/configmaps?resourceVersion=$rv" && code_is 200 &&
	req GET "/api/v1/namespaces/default?resourceVersion=$rv" && code_is 200
'

test_expect_success 'managedFields: fieldsV1 keys in the order kube-apiserver writes them, at every level' '
	req PATCH "$NS/configmaps/sorted?fieldManager=t&force=true" \
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"sorted\",\"labels\":{\"z\":\"1\",\"a\":\"2\"},\"annotations\":{\"y\":\"1\"}},\"data\":{\"zz\":\"1\",\"b\":\"2\",\"a\":\"3\"}}" \
		application/apply-patch+yaml &&
	code_is 201 &&
	req GET $NS/configmaps/sorted && code_is 200 &&
	jq -e "[.metadata.managedFields[].fieldsV1 | .. | objects | keys_unsorted == keys] | all and length > 3" out.json &&
	jq -c ".metadata.managedFields[0].fieldsV1[\"f:metadata\"][\"f:labels\"] | keys_unsorted" out.json >actual &&
	echo "[\"f:a\",\"f:z\"]" >expect && test_cmp expect actual &&
	# keyed list entries by their key values (numbers by value, not by text)
	req PATCH "$NS/services/sorted?fieldManager=t&force=true" \
		"{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"sorted\"},\"spec\":{\"ports\":[{\"port\":8883,\"protocol\":\"TCP\"},{\"port\":443,\"protocol\":\"TCP\"},{\"port\":80,\"protocol\":\"TCP\"}]}}" \
		application/apply-patch+yaml &&
	code_is 201 &&
	jq -r ".metadata.managedFields[0].fieldsV1[\"f:spec\"][\"f:ports\"] | keys_unsorted[]" out.json >actual &&
	cat >expect <<-\EOT &&
	k:{"port":80,"protocol":"TCP"}
	k:{"port":443,"protocol":"TCP"}
	k:{"port":8883,"protocol":"TCP"}
	EOT
	test_cmp expect actual
'

test_expect_success 'generateName picks a free name; no name at all is 422' '
	req POST $NS/configmaps "{\"metadata\":{\"generateName\":\"gen-\"}}" &&
	code_is 201 &&
	jq -r .metadata.name out.json >name && grep -E "^gen-[a-z0-9]{5}$" name &&
	req POST $NS/configmaps "{\"metadata\":{}}" &&
	code_is 422 &&
	jq -e ".reason == \"Invalid\" and .details.causes[0].field == \"metadata.name\"" out.json
'

test_expect_success 'a name holding a NUL byte is 422 Invalid, as any other bad name; nothing is stored' '
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"BAD\"}}" && code_is 422 && mv out.json bad.json &&
	jq -c --arg q "nul\\x00x" "(.message, .details.causes[].message) |= gsub(\"BAD\"; \$q) | .details.name = \"nul\u0000x\"" \
		bad.json >expect &&
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"nul\\u0000x\"}}" && code_is 422 &&
	jq -c . out.json >actual && test_cmp expect actual &&
	req GET $NS/configmaps/nul && code_is 404 &&
	ksim_curl -o l.json $NS/configmaps && jq -e "[.items[].metadata.name | select(startswith(\"nul\"))] == []" l.json &&
	for n in "\\u0000" "x\\u0000" "\\u0000x" "caf\\u00e9" "a\\u0001b"; do
		req POST $NS/configmaps "{\"metadata\":{\"name\":\"$n\"}}" && code_is 422 &&
		jq -e ".details.causes == [.details.causes[0]] and .details.causes[0].reason == \"FieldValueInvalid\" and .details.causes[0].field == \"metadata.name\"" out.json || return 1
	done
'

test_expect_success 'a generateName holding a NUL byte is 422, on generateName and the name made of it' '
	req POST $NS/configmaps "{\"metadata\":{\"generateName\":\"gen\\u0000\"}}" && code_is 422 &&
	jq -e "[.details.causes[].field] == [\"metadata.generateName\", \"metadata.name\"]" out.json &&
	jq -e ".details.causes[0].message | startswith(\"Invalid value: \\\"gen\\\\x00\\\": a lowercase RFC 1123 subdomain\")" out.json &&
	jq -e ".details.name | test(\"^gen\u0000[a-z0-9]{5}$\")" out.json &&
	req GET $NS/configmaps/gen && code_is 404 &&
	req POST $NS/configmaps "{\"metadata\":{\"generateName\":\"ok-\"}}" && code_is 201
'

# method path file [content-type]: as req, the body read from file (too big for an argument).
reqf () {
	ksim_curl -o out.json -w "%{http_code}\n" -X "$1" -H "Content-Type: ${4:-application/json}" \
		--data-binary "@$3" "$2" >code
}

# The wording of kube-apiserver 1.30's apimachinery (validation.IsDNS1123Subdomain,
# IsDNS1123Label, field.TooLong), which ksim's /version names.
SUBDOMAIN="a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
LABEL="a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
A253=$(printf "%0253d" 0 | tr 0 a)

test_expect_success 'a name of 253 characters is taken; 254 get the length cause alone, as kube-apiserver' '
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"$A253\"}}" && code_is 201 &&
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"${A253}b\"}}" && code_is 422 &&
	jq -c . out.json >actual &&
	jq -nc --arg n "${A253}b" "{kind:\"Status\",apiVersion:\"v1\",metadata:{},status:\"Failure\",
		message:\"ConfigMap \\\"\(\$n)\\\" is invalid: metadata.name: Invalid value: \\\"\(\$n)\\\": must be no more than 253 characters\",
		reason:\"Invalid\",details:{name:\$n,kind:\"ConfigMap\",causes:[{reason:\"FieldValueInvalid\",
		message:\"Invalid value: \\\"\(\$n)\\\": must be no more than 253 characters\",field:\"metadata.name\"}]},code:422}" >expect &&
	test_cmp expect actual &&
	req GET "$NS/configmaps/${A253}b" && code_is 404
'

test_expect_success 'a name too long and of bad characters: both causes, length first, in one bracketed message' '
	n="${A253}B" &&
	req POST $NS/secrets "{\"metadata\":{\"name\":\"$n\"}}" && code_is 422 &&
	jq -r .message out.json >actual &&
	printf "%s\n" "Secret \"$n\" is invalid: [metadata.name: Invalid value: \"$n\": must be no more than 253 characters, metadata.name: Invalid value: \"$n\": $SUBDOMAIN]" >expect &&
	test_cmp expect actual &&
	jq -c "[.details.causes[] | [.reason, .field, .message]]" out.json >actual &&
	jq -nc --arg a "Invalid value: \"$n\": must be no more than 253 characters" --arg b "Invalid value: \"$n\": $SUBDOMAIN" \
		"[[\"FieldValueInvalid\", \"metadata.name\", \$a], [\"FieldValueInvalid\", \"metadata.name\", \$b]]" >expect &&
	test_cmp expect actual
'

test_expect_success 'a long generateName: the name made of its first 58 bytes; over 253 it is refused on generateName alone' '
	req POST $NS/configmaps "{\"metadata\":{\"generateName\":\"${A253}\"}}" && code_is 201 &&
	jq -r .metadata.name out.json >name &&
	grep -Ex "a{58}[a-z0-9]{5}" name &&
	req POST $NS/configmaps "{\"metadata\":{\"generateName\":\"${A253}bc\"}}" && code_is 422 &&
	jq -c "[.details.causes[] | [.field, .message]]" out.json >actual &&
	jq -nc --arg n "${A253}bc" "[[\"metadata.generateName\", \"Invalid value: \\(\$n | tojson): must be no more than 253 characters\"]]" >expect &&
	test_cmp expect actual
'

test_expect_success 'namespace names: a label (63 characters), "must not contain dots", the label wording' '
	req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"$(printf "%063d" 0)\"}}" && code_is 201 &&
	req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"$(printf "%064d" 0)\"}}" && code_is 422 &&
	jq -r ".details.causes[].message" out.json >actual &&
	printf "%s\n" "Invalid value: \"$(printf "%064d" 0)\": must be no more than 63 characters" >expect &&
	test_cmp expect actual &&
	req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"a.b\"}}" && code_is 422 &&
	jq -r .message out.json >actual &&
	echo "Namespace \"a.b\" is invalid: metadata.name: Invalid value: \"a.b\": must not contain dots" >expect &&
	test_cmp expect actual &&
	req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"A-b\"}}" && code_is 422 &&
	jq -r .message out.json >actual &&
	printf "%s\n" "Namespace \"A-b\" is invalid: metadata.name: Invalid value: \"A-b\": $LABEL" >expect &&
	test_cmp expect actual
'

test_expect_success 'a subdomain is labels joined by dots: "a..b", "a.-b", ".a" are refused, "a.b-c.d" taken' '
	for n in "a..b" "a.-b" "a-.b" ".a" "a."; do
		req POST $NS/configmaps "{\"metadata\":{\"name\":\"$n\"}}" && code_is 422 || return 1
	done &&
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"a.b-c.d\"}}" && code_is 201
'

# N: N bytes of "x", no newline
bytes () {
	head -c "$1" /dev/zero | tr "\0" x
}

TOOLONG="Too long: must have at most 1048576 bytes"

test_expect_success 'a ConfigMap over 1 MiB (data and binaryData together) is 422 on create, update, patch and apply' '
	bytes 524288 >half && bytes 524289 >half1 &&
	base64 -w0 half >half.b64 &&
	jq -n --rawfile a half --rawfile b half.b64 "{metadata:{name:\"mib\"},data:{a:\$a},binaryData:{b:\$b}}" >mib.json &&
	reqf POST $NS/configmaps mib.json && code_is 201 &&
	jq -n --rawfile a half1 --rawfile b half.b64 "{metadata:{name:\"big\"},data:{a:\$a},binaryData:{b:\$b}}" >big.json &&
	reqf POST $NS/configmaps big.json && code_is 422 &&
	jq -c . out.json >actual &&
	jq -nc --arg m "$TOOLONG" "{kind:\"Status\",apiVersion:\"v1\",metadata:{},status:\"Failure\",
		message:\"ConfigMap \\\"big\\\" is invalid: []: \(\$m)\",reason:\"Invalid\",
		details:{name:\"big\",kind:\"ConfigMap\",causes:[{reason:\"FieldValueTooLong\",message:\$m,field:\"[]\"}]},
		code:422}" >expect &&
	test_cmp expect actual &&
	req GET $NS/configmaps/big && code_is 404 &&
	jq -n --rawfile a half1 "{metadata:{name:\"mib\"},data:{c:\$a}}" >grow.json &&
	reqf PATCH $NS/configmaps/mib grow.json application/merge-patch+json && code_is 422 &&
	jq -e ".message == \"ConfigMap \\\"mib\\\" is invalid: []: $TOOLONG\"" out.json &&
	ksim_curl $NS/configmaps/mib | jq "del(.binaryData) | .data.a = \"\"" >put.json &&
	jq --rawfile a half1 ".binaryData = {b: (\$a | @base64)} | .data.a = \$a" put.json >put2.json &&
	reqf PUT $NS/configmaps/mib put2.json && code_is 422 &&
	jq -e ".details.causes == [{reason: \"FieldValueTooLong\", message: \"$TOOLONG\", field: \"[]\"}]" out.json &&
	jq -n --rawfile a half1 --rawfile b half "{apiVersion:\"v1\",kind:\"ConfigMap\",metadata:{name:\"mib\"},data:{a:\$a,b:\$b}}" >apply.json &&
	reqf PATCH "$NS/configmaps/mib?fieldManager=t&force=true" apply.json application/apply-patch+yaml && code_is 422 &&
	jq -e ".message == \"ConfigMap \\\"mib\\\" is invalid: []: $TOOLONG\"" out.json &&
	ksim_curl $NS/configmaps/mib >now.json &&
	jq -e "(.data.a | length) == 524288 and (.data | keys) == [\"a\"]" now.json
'

test_expect_success 'a Secret over 1 MiB of decoded data (stringData counted) is 422 on field data; 1 MiB is taken' '
	bytes 1048576 | base64 -w0 >mib.b64 && bytes 1048575 | base64 -w0 >mib1.b64 &&
	jq -n --rawfile a mib.b64 "{metadata:{name:\"mib\"},data:{a:\$a}}" >s.json &&
	reqf POST $NS/secrets s.json && code_is 201 &&
	jq -n --rawfile a mib1.b64 "{metadata:{name:\"big\"},data:{a:\$a},stringData:{b:\"xy\"}}" >s.json &&
	reqf POST $NS/secrets s.json && code_is 422 &&
	jq -c . out.json >actual &&
	jq -nc --arg m "$TOOLONG" "{kind:\"Status\",apiVersion:\"v1\",metadata:{},status:\"Failure\",
		message:\"Secret \\\"big\\\" is invalid: data: \(\$m)\",reason:\"Invalid\",
		details:{name:\"big\",kind:\"Secret\",causes:[{reason:\"FieldValueTooLong\",message:\$m,field:\"data\"}]},
		code:422}" >expect &&
	test_cmp expect actual &&
	req PATCH $NS/secrets/mib "{\"stringData\":{\"b\":\"x\"}}" application/merge-patch+json && code_is 422 &&
	jq -e ".message == \"Secret \\\"mib\\\" is invalid: data: $TOOLONG\"" out.json &&
	req PATCH "$NS/secrets/mib?dryRun=All" "{\"data\":{\"a\":null,\"b\":\"eHk=\"}}" application/merge-patch+json && code_is 200
'

test_expect_success 'annotations over 256 KiB (keys and values) are 422 on metadata.annotations, before the data cause' '
	bytes 262143 >v && bytes 262144 >v1 &&
	jq -n --rawfile a half1 --rawfile v v1 "{metadata:{name:\"ann\",annotations:{k:\$v}},data:{a:\$a,b:\$a}}" >ann.json &&
	reqf POST $NS/configmaps ann.json && code_is 422 &&
	jq -r .message out.json >actual &&
	echo "ConfigMap \"ann\" is invalid: [metadata.annotations: Too long: must have at most 262144 bytes, []: $TOOLONG]" >expect &&
	test_cmp expect actual &&
	jq -n --rawfile v v1 "{metadata:{name:\"ann\",annotations:{k:\$v}}}" >ann.json &&
	reqf POST $NS/configmaps ann.json && code_is 422 &&
	jq -e ".details.causes == [{reason: \"FieldValueTooLong\", message: \"Too long: must have at most 262144 bytes\", field: \"metadata.annotations\"}]" out.json &&
	jq -n --rawfile v v "{metadata:{name:\"ann\",annotations:{k:\$v}}}" >ann.json &&
	reqf POST $NS/configmaps ann.json && code_is 201
'

# kubectl VERSION VERB...: the error kubectl prints for a Secret and a ConfigMap over 1 MiB
for v in 27 33; do
	test_expect_success "kubectl 1.$v: create, apply (client- and server-side), replace of an object over 1 MiB print the server's message" '
		K=/usr/lib/google-cloud-sdk/bin/kubectl.1.'$v' &&
		bytes 1048577 >f &&
		test_must_fail timeout 30 $K create secret generic big'$v' --from-file=f 2>err &&
		grep -F "Secret \"big'$v'\" is invalid: data: $TOOLONG" err &&
		test_must_fail timeout 30 $K create configmap big'$v' --from-file=f 2>err &&
		grep -F "ConfigMap \"big'$v'\" is invalid: []: $TOOLONG" err &&
		timeout 30 $K create configmap big'$v' --from-file=f --dry-run=client -o json >cm.json &&
		test_must_fail timeout 30 $K apply --server-side -f cm.json 2>err &&
		grep -F "ConfigMap \"big'$v'\" is invalid: []: $TOOLONG" err &&
		test_must_fail timeout 30 $K apply -f cm.json 2>err &&
		grep -F "ConfigMap \"big'$v'\" is invalid:" err &&
		grep -Fx "* metadata.annotations: Too long: must have at most 262144 bytes" err &&
		grep -Fx "* []: $TOOLONG" err &&
		jq ".data.f = \"small\"" cm.json >small.json &&
		timeout 30 $K create -f small.json &&
		test_must_fail timeout 30 $K replace -f cm.json 2>err &&
		grep -F "ConfigMap \"big'$v'\" is invalid: []: $TOOLONG" err &&
		timeout 30 $K get configmap big'$v' -o json >now.json &&
		jq -e ".data.f == \"small\"" now.json
	'
done

test_expect_success 'a namespace or a body namespace holding a NUL byte: 422 and 400' '
	req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"ns\\u0000x\"}}" && code_is 422 &&
	jq -e ".details.causes[0].message | contains(\"RFC 1123 label\")" out.json &&
	req GET /api/v1/namespaces/ns && code_is 404 &&
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"n0\",\"namespace\":\"default\\u0000x\"}}" && code_is 400 &&
	jq -e ".message == \"the namespace of the provided object does not match the namespace sent on the request\"" out.json &&
	req GET $NS/configmaps/n0 && code_is 404
'

test_expect_success 'PUT and apply with a body name that is the URL name and a NUL byte more: 400, nothing changed' '
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"keep\"},\"data\":{\"a\":\"1\"}}" && code_is 201 &&
	req PUT $NS/configmaps/keep "{\"metadata\":{\"name\":\"keep\\u0000x\"},\"data\":{\"a\":\"2\"}}" && code_is 400 &&
	jq -e ".message == \"the name of the object (keep\u0000x) does not match the name on the URL (keep)\"" out.json &&
	req PATCH "$NS/configmaps/keep?fieldManager=t" \
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"keep\\u0000x\"},\"data\":{\"a\":\"3\"}}" \
		application/apply-patch+yaml && code_is 400 &&
	req PUT $NS/configmaps/keep "{\"metadata\":{\"name\":\"keep\",\"namespace\":\"default\\u0000\"},\"data\":{\"a\":\"4\"}}" && code_is 400 &&
	req GET $NS/configmaps/keep && code_is 200 && jq -e ".data.a == \"1\"" out.json
'

test_expect_success 'a NUL byte in the URL (%00) stays in the name: no other object is read or deleted' '
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"pct\"}}" && code_is 201 &&
	req GET $NS/configmaps/pct%00x && code_is 404 && jq -e ".reason == \"NotFound\"" out.json &&
	req DELETE $NS/configmaps/pct%00x && code_is 404 &&
	req GET /api/v1/namespaces/default%00x && code_is 404 &&
	req GET $NS/configmaps/p%63t && code_is 200 && jq -e ".metadata.name == \"pct\"" out.json
'

test_expect_success 'a body namespace that differs from the URL is 400; a missing namespace is 404' '
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"n\",\"namespace\":\"other\"}}" &&
	code_is 400 &&
	jq -e ".message == \"the namespace of the provided object does not match the namespace sent on the request\"" out.json &&
	req POST /api/v1/namespaces/nowhere/configmaps "{\"metadata\":{\"name\":\"n\"}}" &&
	code_is 404 &&
	jq -e ".message == \"namespaces \\\"nowhere\\\" not found\"" out.json
'

test_expect_success 'label selectors: =, !=, in, notin, exists, !exists; a bad one is 400' '
	for x in "a:env=prod,tier=web" "b:env=dev,tier=web" "c:env=prod" "d:tier=db"; do
		name=${x%%:*} && labels=$(echo "${x#*:}" | jq -R "split(\",\") | map(split(\"=\") | {(.[0]): .[1]}) | add") &&
		req POST $NS/configmaps "{\"metadata\":{\"name\":\"sel-$name\",\"labels\":$labels}}" &&
		code_is 201 || return 1
	done &&
	check () {
		ksim_curl -o l.json -G --data-urlencode "labelSelector=$1" $NS/configmaps &&
		jq -r "[.items[].metadata.name | select(startswith(\"sel-\"))] | join(\",\")" l.json >actual &&
		echo "$2" >expect && test_cmp expect actual
	} &&
	check "env=prod" "sel-a,sel-c" &&
	check "env==prod,tier=web" "sel-a" &&
	check "env!=prod" "sel-b,sel-d" &&
	check "env in (dev, prod),tier" "sel-a,sel-b" &&
	check "tier notin (web)" "sel-c,sel-d" &&
	check "!env" "sel-d" &&
	ksim_curl -o l.json -w "%{http_code}\n" -G --data-urlencode "labelSelector=env in prod" $NS/configmaps >code &&
	code_is 400
'

test_expect_success 'field selectors: metadata.name and metadata.namespace; unsupported fields are 400' '
	ksim_curl -o l.json -G --data-urlencode "fieldSelector=metadata.name=sel-b" /api/v1/configmaps &&
	jq -e "[.items[].metadata.name] == [\"sel-b\"]" l.json &&
	ksim_curl -o l.json -G --data-urlencode "fieldSelector=metadata.namespace!=default" /api/v1/configmaps &&
	# (what kube-controller-manager puts in every namespace)
	jq -e "[.items[] | select(.metadata.namespace == \"default\" or .metadata.name != \"kube-root-ca.crt\")] == []" l.json &&
	jq -e "[.items[].metadata.namespace] | index(\"kube-system\")" l.json &&
	ksim_curl -o l.json -w "%{http_code}\n" -G --data-urlencode "fieldSelector=spec.foo=x" $NS/configmaps >code &&
	code_is 400 &&
	jq -e ".message == \"field label not supported: spec.foo\"" l.json
'

test_expect_success 'pods: created Pending; field selectors on status.phase and spec.nodeName' '
	req POST $NS/pods "{\"metadata\":{\"name\":\"p1\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}" &&
	code_is 201 && jq -e ".status.phase == \"Pending\"" out.json &&
	ksim_curl -o l.json -G --data-urlencode "fieldSelector=status.phase!=Failed,spec.nodeName=n1" $NS/pods &&
	jq -e "[.items[].metadata.name] == [\"p1\"]" l.json &&
	ksim_curl -o l.json -G --data-urlencode "fieldSelector=spec.nodeName=n2" $NS/pods &&
	jq -e ".items == []" l.json
'

test_expect_success 'deletecollection with a label selector answers the deleted objects' '
	ksim_curl -o out.json -X DELETE -G --data-urlencode "labelSelector=tier=web" $NS/configmaps &&
	jq -e ".kind == \"ConfigMapList\" and ([.items[].metadata.name] | sort) == [\"sel-a\", \"sel-b\"]" out.json &&
	ksim_curl -o l.json -G --data-urlencode "labelSelector=tier" $NS/configmaps &&
	jq -e "[.items[].metadata.name] == [\"sel-d\"]" l.json
'

test_expect_success 'delete preconditions: a wrong uid or resourceVersion is 409' '
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"pre\"}}" &&
	uid=$(jq -r .metadata.uid out.json) && rv=$(jq -r .metadata.resourceVersion out.json) &&
	req DELETE $NS/configmaps/pre "{\"preconditions\":{\"uid\":\"wrong\"}}" &&
	code_is 409 && jq -e ".reason == \"Conflict\" and (.message | contains(\"UID in precondition\") or contains(\"the UID in the precondition\"))" out.json &&
	req DELETE $NS/configmaps/pre "{\"preconditions\":{\"resourceVersion\":\"1\"}}" &&
	code_is 409 &&
	req DELETE $NS/configmaps/pre "{\"preconditions\":{\"uid\":\"$uid\",\"resourceVersion\":\"$rv\"}}" &&
	code_is 200 && jq -e ".status == \"Success\" and .details.uid == \"$uid\"" out.json
'

# kube-apiserver: a patch (server-side apply too) whose object names a uid other than the stored one
# fails uid immutability (422, nothing written); an apply naming a uid creates nothing (409, "uid
# mismatch"); the stored uid itself is taken. So a write meant for a namespace deleted and made again
# under its name by someone else is refused.
test_expect_success 'a uid in a patched or applied object: another is 422 (immutable), none stored 409; the stored one taken' '
	req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"uidns\"}}" &&
	code_is 201 &&
	uid=$(jq -r .metadata.uid out.json) && rv=$(jq -r .metadata.resourceVersion out.json) &&
	req PATCH "/api/v1/namespaces/uidns?fieldManager=t&force=true" \
		"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"uidns\",\"uid\":\"not-its-uid\",\"labels\":{\"a\":\"b\"}}}" \
		application/apply-patch+yaml &&
	code_is 422 &&
	jq -c "[.reason, .message, .details.causes]" out.json >actual &&
	echo "[\"Invalid\",\"Namespace \\\"uidns\\\" is invalid: metadata.uid: Invalid value: \\\"not-its-uid\\\": field is immutable\",[{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value: \\\"not-its-uid\\\": field is immutable\",\"field\":\"metadata.uid\"}]]" >expect &&
	test_cmp expect actual &&
	req PATCH /api/v1/namespaces/uidns "{\"metadata\":{\"uid\":\"not-its-uid\",\"labels\":{\"a\":\"b\"}}}" \
		application/merge-patch+json &&
	code_is 422 &&
	ksim_curl -o ns.json /api/v1/namespaces/uidns &&
	jq -e --arg rv "$rv" ".metadata.resourceVersion == \$rv and .metadata.labels.a == null" ns.json &&
	req PATCH "/api/v1/namespaces/uidns?fieldManager=t&force=true" \
		"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"uidns\",\"uid\":\"$uid\",\"labels\":{\"a\":\"b\"}}}" \
		application/apply-patch+yaml &&
	code_is 200 &&
	jq -e --arg uid "$uid" ".metadata.uid == \$uid and .metadata.labels.a == \"b\"" out.json &&
	req PATCH "/api/v1/namespaces/uidgone?fieldManager=t&force=true" \
		"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"uidgone\",\"uid\":\"$uid\"}}" \
		application/apply-patch+yaml &&
	code_is 409 &&
	jq -r "[.reason, .message] | join(\"|\")" out.json >actual &&
	echo "Conflict|Operation cannot be fulfilled on namespaces \"uidgone\": uid mismatch: the provided object specified uid $uid, and no existing object was found" >expect &&
	test_cmp expect actual &&
	test_must_fail ksim_curl -f -o /dev/null /api/v1/namespaces/uidgone 2>/dev/null
'

test_expect_success 'pods and serviceaccounts answer a delete with the object' '
	req DELETE $NS/pods/p1 &&
	code_is 200 && jq -e ".kind == \"Pod\" and .metadata.name == \"p1\"" out.json
'

test_expect_success 'garbage collection: dependents of a deleted owner go (Background), not with Orphan' '
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"owner\"}}" &&
	uid=$(jq -r .metadata.uid out.json) &&
	ref="[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"owner\",\"uid\":\"$uid\"}]" &&
	req POST $NS/secrets "{\"metadata\":{\"name\":\"dep1\",\"ownerReferences\":$ref}}" && code_is 201 &&
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"dep2\",\"ownerReferences\":$ref}}" && code_is 201 &&
	req DELETE $NS/configmaps/owner "{\"propagationPolicy\":\"Background\"}" && code_is 200 &&
	test_wait_for 10 sh -c "test \"\$(curl -s -o /dev/null -w \"%{http_code}\" $KSIM_URL$NS/secrets/dep1)\" = 404" &&
	test_wait_for 10 sh -c "test \"\$(curl -s -o /dev/null -w \"%{http_code}\" $KSIM_URL$NS/configmaps/dep2)\" = 404" &&
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"owner2\"}}" &&
	uid=$(jq -r .metadata.uid out.json) &&
	req POST $NS/secrets "{\"metadata\":{\"name\":\"dep3\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"owner2\",\"uid\":\"$uid\"}]}}" &&
	req DELETE "$NS/configmaps/owner2?propagationPolicy=Orphan" && code_is 200 &&
	sleep 1 &&
	req GET $NS/secrets/dep3 && code_is 200 &&
	jq -e ".metadata.ownerReferences == null" out.json
'

test_expect_success 'finalizers: delete sets deletionTimestamp; removing the last finalizer deletes' '
	req POST $NS/configmaps "{\"metadata\":{\"name\":\"fin\",\"finalizers\":[\"example.com/a\",\"example.com/b\"]}}" &&
	req DELETE $NS/configmaps/fin && code_is 200 &&
	jq -e ".metadata.deletionTimestamp and .metadata.deletionGracePeriodSeconds == 0 and .kind == \"ConfigMap\"" out.json &&
	req PATCH $NS/configmaps/fin "{\"metadata\":{\"finalizers\":[\"example.com/a\",\"example.com/c\"]}}" application/merge-patch+json &&
	code_is 422 && jq -e ".message | contains(\"no new finalizers can be added if the object is being deleted\")" out.json &&
	req PATCH $NS/configmaps/fin "{\"metadata\":{\"finalizers\":[\"example.com/a\"]}}" application/merge-patch+json &&
	code_is 200 &&
	req GET $NS/configmaps/fin && code_is 200 &&
	req PATCH $NS/configmaps/fin "{\"metadata\":{\"finalizers\":null}}" application/merge-patch+json &&
	code_is 200 &&
	req GET $NS/configmaps/fin && code_is 404
'

test_expect_success 'leases: create on PUT, the resourceVersion is required to update, MicroTime kept' '
	L=/apis/coordination.k8s.io/v1/namespaces/default/leases &&
	body="{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"lock\"},\"spec\":{\"holderIdentity\":\"a\",\"leaseDurationSeconds\":15,\"renewTime\":\"2024-05-01T10:05:02.654321Z\"}}" &&
	req PUT $L/lock "$body" && code_is 201 &&
	jq -e ".spec.renewTime == \"2024-05-01T10:05:02.654321Z\"" out.json &&
	rv=$(jq -r .metadata.resourceVersion out.json) &&
	req PUT $L/lock "$body" && code_is 422 &&
	jq -e ".details.causes[0].field == \"metadata.resourceVersion\" and (.message | contains(\"must be specified for an update\"))" out.json &&
	req PUT $L/lock "$(echo "$body" | jq -c ".metadata.resourceVersion = \"$rv\" | .spec.holderIdentity = \"b\"")" &&
	code_is 200 &&
	req PUT $L/lock "$(echo "$body" | jq -c ".metadata.resourceVersion = \"$rv\" | .spec.holderIdentity = \"c\"")" &&
	code_is 409
'

test_expect_success 'events: core/v1 readable as events.k8s.io/v1; events.k8s.io creates are validated' '
	req POST $NS/events "{\"metadata\":{\"name\":\"e1\"},\"involvedObject\":{\"kind\":\"ConfigMap\",\"name\":\"x\",\"namespace\":\"default\"},\"reason\":\"Tested\",\"message\":\"hello\",\"type\":\"Normal\",\"count\":1,\"reportingComponent\":\"me\"}" &&
	code_is 201 &&
	req GET /apis/events.k8s.io/v1/namespaces/default/events/e1 && code_is 200 &&
	jq -e ".apiVersion == \"events.k8s.io/v1\" and .note == \"hello\" and .regarding.name == \"x\" and .deprecatedCount == 1 and .reportingController == \"me\"" out.json &&
	req POST /apis/events.k8s.io/v1/namespaces/default/events "{\"metadata\":{\"name\":\"e2\"},\"type\":\"Normal\",\"reason\":\"R\"}" &&
	code_is 422 &&
	jq -e "[.details.causes[].field] | index(\"eventTime\") and index(\"reportingController\") and index(\"action\")" out.json &&
	req POST /apis/events.k8s.io/v1/namespaces/default/events "{\"metadata\":{\"name\":\"e3\"},\"eventTime\":\"2024-05-01T10:00:00.123456Z\",\"reportingController\":\"example.com/c\",\"reportingInstance\":\"i\",\"action\":\"Do\",\"reason\":\"Done\",\"note\":\"n\",\"type\":\"Normal\",\"regarding\":{\"kind\":\"ConfigMap\",\"name\":\"x\"}}" &&
	code_is 201 &&
	req GET $NS/events/e3 &&
	jq -e ".message == \"n\" and .involvedObject.name == \"x\" and .reportingComponent == \"example.com/c\"" out.json
'

test_expect_success 'a CRD with two versions: both served, apiVersion rewritten, one storage' '
	req POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$(cat "$FIXTURES/crd-multi.json")" &&
	code_is 201 &&
	jq -e ".status.storedVersions == [\"v1\"] and .spec.names.listKind == \"GadgetList\" and .spec.names.singular == \"gadget\"" out.json &&
	ksim_curl -o apis.json /apis &&
	jq -e "[.groups[] | select(.name == \"example.com\")][0] | (.versions | map(.version)) == [\"v1\", \"v1beta1\"] and .preferredVersion.version == \"v1\"" apis.json &&
	req POST /apis/example.com/v1beta1/namespaces/default/gadgets "{\"apiVersion\":\"example.com/v1beta1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"g\"},\"spec\":{\"n\":1}}" &&
	code_is 201 && jq -e ".apiVersion == \"example.com/v1beta1\" and .metadata.generation == 1" out.json &&
	req GET /apis/example.com/v1/namespaces/default/gadgets/g && code_is 200 &&
	jq -e ".apiVersion == \"example.com/v1\" and .spec.n == 1" out.json &&
	ksim_curl -o l.json /apis/example.com/v1/namespaces/default/gadgets &&
	jq -e ".kind == \"GadgetList\" and .items[0].kind == \"Gadget\" and .items[0].apiVersion == \"example.com/v1\"" l.json
'

test_expect_success 'custom resources: 422 with field paths, unknown fields pruned (400 with Strict), PUT needs the RV' '
	G=/apis/example.com/v1/namespaces/default/gadgets &&
	req POST $G "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"big\"},\"spec\":{\"n\":11}}" &&
	code_is 422 && jq -e ".details.causes[0].field == \"spec.n\" and .details.kind == \"Gadget\" and .details.group == \"example.com\"" out.json &&
	ksim_curl -D h -o out.json -X POST -H "Content-Type: application/json" -d "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"extra\"},\"spec\":{\"n\":2,\"junk\":1}}" $G &&
	jq -e ".spec == {n: 2}" out.json &&
	grep -i "^Warning: 299 - \"unknown field \\\\\"spec.junk\\\\\"\"" h &&
	req POST "$G?fieldValidation=Strict" "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"strict\"},\"spec\":{\"junk\":1}}" &&
	code_is 400 && jq -e ".message == \"strict decoding error: unknown field \\\"spec.junk\\\"\"" out.json &&
	req PUT $G/g "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"g\"},\"spec\":{\"n\":3}}" &&
	code_is 422 && jq -e ".message | contains(\"metadata.resourceVersion: Invalid value: 0x0: must be specified for an update\")" out.json
'

test_expect_success 'custom resources: null in a non-nullable field is dropped (then defaulted), nullable nulls kept' '
	req POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$(cat "$FIXTURES/crd-nulls.json")" &&
	code_is 201 &&
	K=/apis/example.com/v1/namespaces/default/knobs &&
	ksim_curl -D h -o out.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" -d "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Knob\",\"metadata\":{\"name\":\"k\"},\"spec\":{\"mode\":null,\"size\":null,\"note\":null,\"hint\":null,\"inner\":{\"tag\":null,\"level\":null},\"labels\":{\"a\":null,\"b\":\"c\"},\"list\":[{\"x\":null}]}}" $K >code &&
	code_is 201 &&
	jq -e -c ".spec == {mode: \"auto\", note: null, hint: null, inner: {level: 3}, labels: {b: \"c\"}, list: [{}]}" out.json &&
	! grep -i "^Warning:" h &&
	req GET $K/k && code_is 200 &&
	jq -e ".spec.mode == \"auto\" and (.spec | has(\"size\") | not) and (.spec | has(\"note\"))" out.json &&
	jq -c ".spec.size = null | .spec.mode = \"manual\"" out.json >put.json &&
	req PUT $K/k "$(cat put.json)" && code_is 200 &&
	jq -e "(.spec | has(\"size\") | not) and .spec.mode == \"manual\"" out.json &&
	req PATCH $K/k "{\"spec\":{\"inner\":{\"tag\":null,\"level\":7}}}" application/merge-patch+json && code_is 200 &&
	jq -e ".spec.inner == {level: 7}" out.json &&
	req DELETE /apis/apiextensions.k8s.io/v1/customresourcedefinitions/knobs.example.com && code_is 200
'

test_expect_success 'status subresource: only .status changes there; the main resource keeps it; generation follows spec' '
	G=/apis/example.com/v1/namespaces/default/gadgets &&
	ksim_curl -o g.json $G/g &&
	jq -c ".status = {phase: \"Up\"} | .metadata.labels = {sneaky: \"yes\"} | .spec.n = 9" g.json >st.json &&
	req PUT $G/g/status "$(cat st.json)" && code_is 200 &&
	jq -e ".status.phase == \"Up\" and .metadata.labels == null and .spec.n == 1 and .metadata.generation == 1" out.json &&
	jq -e "keys_unsorted == [\"kind\", \"apiVersion\", \"metadata\", \"spec\", \"status\"]" out.json &&
	jq -c ".status = {phase: \"Down\"} | .spec.n = 5" out.json >main.json &&
	req PUT $G/g "$(cat main.json)" && code_is 200 &&
	jq -e ".status.phase == \"Up\" and .spec.n == 5 and .metadata.generation == 2" out.json &&
	req PATCH $G/g "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}" application/merge-patch+json && code_is 200 &&
	jq -e ".metadata.generation == 2" out.json &&
	req GET $G/g/status && code_is 200 && jq -e ".kind == \"Gadget\" and .status.phase == \"Up\"" out.json
'

test_expect_success 'status subresource of the workloads: the metadata is written, the spec, the managedFields and a Deployment'"'"'s labels are not; a patch cannot rename or move an object' '
	A=/apis/apps/v1/namespaces/default &&
	req POST $A/deployments "{\"metadata\":{\"name\":\"stm\",\"labels\":{\"l\":\"1\"}},\"spec\":{\"replicas\":0,\"selector\":{\"matchLabels\":{\"a\":\"stm\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"stm\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}" &&
	code_is 201 &&
	req PATCH $A/deployments/stm/status "{\"metadata\":{\"annotations\":{\"n\":\"2\"},\"labels\":{\"l\":\"9\"}},\"spec\":{\"replicas\":4},\"status\":{\"replicas\":0}}" application/merge-patch+json &&
	code_is 200 &&
	jq -e ".metadata.annotations.n == \"2\" and .metadata.labels == {l: \"1\"} and .spec.replicas == 0 and .metadata.generation == 1" out.json &&
	jq -e "[.metadata.managedFields[] | select(.fieldsV1[\"f:metadata\"][\"f:annotations\"][\"f:n\"]) | .subresource] == [\"status\"]" out.json &&
	req POST $A/replicasets "{\"metadata\":{\"name\":\"strs\",\"labels\":{\"l\":\"1\"}},\"spec\":{\"replicas\":0,\"selector\":{\"matchLabels\":{\"a\":\"strs\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"strs\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}" &&
	code_is 201 &&
	req PATCH $A/replicasets/strs/status "{\"metadata\":{\"labels\":{\"l\":\"9\"}},\"spec\":{\"replicas\":4}}" application/merge-patch+json &&
	code_is 200 &&
	jq -e ".metadata.labels == {l: \"9\"} and .spec.replicas == 0" out.json &&
	jq -c ".metadata.managedFields" out.json >mf.before &&
	req PATCH $A/replicasets/strs/status "{\"metadata\":{\"managedFields\":[{}]},\"status\":{\"replicas\":0}}" application/merge-patch+json &&
	code_is 200 &&
	jq -c ".metadata.managedFields" out.json >mf.after &&
	test_cmp mf.before mf.after &&
	jq -e "length > 0" mf.after &&
	req PATCH $A/replicasets/strs/status "{\"metadata\":null}" application/merge-patch+json &&
	code_is 400 &&
	jq -e ".message == \"the name of the object () does not match the name on the URL (strs)\"" out.json &&
	req PATCH $A/replicasets/strs "[{\"op\":\"replace\",\"path\":\"/metadata/name\",\"value\":\"other\"}]" application/json-patch+json &&
	code_is 400 &&
	jq -e ".message == \"the name of the object (other) does not match the name on the URL (strs)\"" out.json &&
	req PATCH $A/replicasets/strs "{\"metadata\":{\"namespace\":\"kube-system\"}}" application/merge-patch+json &&
	code_is 400 &&
	jq -e ".message == \"the namespace of the provided object does not match the namespace sent on the request\"" out.json &&
	req GET $A/replicasets/strs && code_is 200 && jq -e ".metadata.labels == {l: \"9\"}" out.json &&
	req PATCH $A/replicasets/strs/status "{\"status\":null}" application/merge-patch+json &&
	code_is 200 &&
	jq -e "has(\"status\") | not" out.json &&
	req POST $A/statefulsets "{\"metadata\":{\"name\":\"stss\"},\"spec\":{\"replicas\":0,\"serviceName\":\"stss\",\"selector\":{\"matchLabels\":{\"a\":\"stss\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"stss\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}" &&
	code_is 201 &&
	req PATCH $A/statefulsets/stss/status "{\"metadata\":{\"labels\":{\"l\":\"3\"}},\"spec\":{\"replicas\":2}}" application/merge-patch+json &&
	code_is 200 &&
	jq -e ".metadata.labels == {l: \"3\"} and .spec.replicas == 0" out.json &&
	req DELETE $A/statefulsets/stss && code_is 200 &&
	req DELETE $A/deployments/stm && code_is 200 &&
	req DELETE $A/replicasets/strs && code_is 200
'

test_expect_success 'validation ratcheting (1.30): a value stored before its schema was tightened stays; a changed one is judged' '
	G=/apis/example.com/v1/namespaces/default/gadgets &&
	C=/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com &&
	ksim_curl -o crd.json $C &&
	jq -c "(.spec.versions[].schema.openAPIV3Schema.properties.spec.properties.n.maximum) = 3" crd.json >tight.json &&
	req PUT $C "$(cat tight.json)" && code_is 200 &&
	req PATCH $G/g "{\"metadata\":{\"labels\":{\"r\":\"1\"}}}" application/merge-patch+json && code_is 200 &&
	jq -e ".spec.n == 5 and .metadata.labels.r == \"1\"" out.json &&
	jq -c ".metadata.labels.r = \"2\"" out.json >put.json &&
	req PUT $G/g "$(cat put.json)" && code_is 200 &&
	jq -c ".status = {phase: \"Steady\"}" out.json >st.json &&
	req PUT $G/g/status "$(cat st.json)" && code_is 200 &&
	req PATCH $G/g "{\"spec\":{\"n\":4}}" application/merge-patch+json && code_is 422 &&
	jq -e ".details.causes | length == 1 and .[0].field == \"spec.n\"" out.json &&
	req POST $G "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"new5\"},\"spec\":{\"n\":5}}" &&
	code_is 422 &&
	ksim_curl -o crd.json $C &&
	jq -c "(.spec.versions[].schema.openAPIV3Schema.properties.spec.properties.n.maximum) = 10" crd.json >loose.json &&
	req PUT $C "$(cat loose.json)" && code_is 200
'

test_expect_success 'tables: printer columns of a CRD, columns of built-ins' '
	T="Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json" &&
	ksim_curl -o t.json -H "$T" /apis/example.com/v1/namespaces/default/gadgets &&
	jq -e "[.columnDefinitions[].name] == [\"Name\", \"N\", \"Age\"] and .kind == \"Table\"" t.json &&
	jq -e ".rows[] | select(.cells[0] == \"g\") | .cells[1] == 5 and .object.kind == \"PartialObjectMetadata\"" t.json &&
	req POST /apis/apps/v1/namespaces/default/deployments "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"replicas\":0,\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}" &&
	code_is 201 &&
	ksim_curl -o t.json -H "$T" /apis/apps/v1/namespaces/default/deployments &&
	jq -e "[.columnDefinitions[].name] == [\"Name\", \"Ready\", \"Up-to-date\", \"Available\", \"Age\", \"Containers\", \"Images\", \"Selector\"] and .rows[0].cells[0:4] == [\"d\", \"0/0\", 0, 0]" t.json &&
	req POST $NS/services "{\"metadata\":{\"name\":\"s\"},\"spec\":{\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}}" &&
	code_is 201 && jq -e ".spec.clusterIP | startswith(\"10.96.\")" out.json &&
	ksim_curl -o t.json -H "$T" $NS/services/s &&
	jq -e "[.columnDefinitions[].name] == [\"Name\", \"Type\", \"Cluster-IP\", \"External-IP\", \"Port(s)\", \"Age\", \"Selector\"] and .rows[0].cells[1] == \"ClusterIP\" and .rows[0].cells[3] == \"<none>\" and .rows[0].cells[4] == \"80/TCP\"" t.json
'

# The columns of a Table: [name, priority] pairs, one line.
cols () {
	jq -c "[.columnDefinitions[] | [.name, .priority]]" "$1"
}

test_expect_success 'tables: the wide columns (priority 1) of built-ins, as kube-apiserver sends them' '
	T="Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json" &&
	req POST /apis/apps/v1/namespaces/default/deployments "{\"metadata\":{\"name\":\"wide\"},\"spec\":{\"replicas\":0,\"selector\":{\"matchLabels\":{\"b\":\"2\",\"a\":\"1\"},\"matchExpressions\":[{\"key\":\"c\",\"operator\":\"NotIn\",\"values\":[\"y\",\"x\"]},{\"key\":\"a0\",\"operator\":\"Exists\"},{\"key\":\"d\",\"operator\":\"DoesNotExist\"}]},\"template\":{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\",\"a0\":\"\"}},\"spec\":{\"containers\":[{\"name\":\"c1\",\"image\":\"i1\"},{\"name\":\"c2\",\"image\":\"i2:3\"}]}}}}" &&
	code_is 201 &&
	ksim_curl -o t.json -H "$T" /apis/apps/v1/namespaces/default/deployments/wide &&
	cols t.json >actual &&
	echo "[[\"Name\",0],[\"Ready\",0],[\"Up-to-date\",0],[\"Available\",0],[\"Age\",0],[\"Containers\",1],[\"Images\",1],[\"Selector\",1]]" >expect &&
	test_cmp expect actual &&
	jq -e ".rows[0].cells[5:] == [\"c1,c2\", \"i1,i2:3\", \"a=1,a0,b=2,c notin (x,y),!d\"]" t.json &&
	ksim_curl -o t.json -H "$T" /apis/apps/v1/namespaces/default/replicasets &&
	cols t.json >actual &&
	echo "[[\"Name\",0],[\"Desired\",0],[\"Current\",0],[\"Ready\",0],[\"Age\",0],[\"Containers\",1],[\"Images\",1],[\"Selector\",1]]" >expect &&
	test_cmp expect actual &&
	ksim_curl -o t.json -H "$T" /apis/apps/v1/namespaces/default/statefulsets &&
	cols t.json >actual &&
	echo "[[\"Name\",0],[\"Ready\",0],[\"Age\",0],[\"Containers\",1],[\"Images\",1]]" >expect &&
	test_cmp expect actual &&
	req POST $NS/services "{\"metadata\":{\"name\":\"sel\"},\"spec\":{\"selector\":{\"tier\":\"web\",\"app\":\"x\"},\"ports\":[{\"port\":80}]}}" &&
	code_is 201 &&
	ksim_curl -o t.json -H "$T" $NS/services &&
	jq -e "[.columnDefinitions[-1] | .name, .priority] == [\"Selector\", 1]" t.json &&
	jq -e "[.rows[] | select(.cells[0] == \"s\" or .cells[0] == \"sel\") | .cells[6]] == [\"<none>\", \"app=x,tier=web\"]" t.json &&
	req POST $NS/pods "{\"metadata\":{\"name\":\"pw\"},\"spec\":{\"nodeName\":\"n1\",\"readinessGates\":[{\"conditionType\":\"g1\"},{\"conditionType\":\"g2\"}],\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}" &&
	code_is 201 &&
	req PATCH $NS/pods/pw/status "{\"status\":{\"podIPs\":[{\"ip\":\"10.1.2.3\"}],\"conditions\":[{\"type\":\"g2\",\"status\":\"True\"},{\"type\":\"g1\",\"status\":\"False\"}]}}" application/merge-patch+json &&
	code_is 200 &&
	ksim_curl -o t.json -H "$T" $NS/pods/pw &&
	cols t.json >actual &&
	echo "[[\"Name\",0],[\"Ready\",0],[\"Status\",0],[\"Restarts\",0],[\"Age\",0],[\"IP\",1],[\"Node\",1],[\"Nominated Node\",1],[\"Readiness Gates\",1]]" >expect &&
	test_cmp expect actual &&
	jq -e ".rows[0].cells[5:] == [\"10.1.2.3\", \"n1\", \"<none>\", \"1/2\"]" t.json
'

test_expect_success 'tables: a pod'"'"'s restarts are a string cell, with the last restart'"'"'s age when known' '
	T="Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json" &&
	ksim_curl -o t.json -H "$T" $NS/pods/pw &&
	jq -e ".rows[0].cells[3] == \"0\"" t.json &&
	# 15 minutes ago: from 10 minutes on, an age is in whole minutes
	# (HumanDuration), so a slow run does not make it 5m1s
	fin=$(date -u -d "-900 sec" +%Y-%m-%dT%H:%M:%SZ) &&
	req PATCH $NS/pods/pw/status "{\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"ready\":true,\"restartCount\":2,\"image\":\"i\",\"imageID\":\"\",\"lastState\":{\"terminated\":{\"exitCode\":1,\"finishedAt\":\"$fin\"}}}]}}" application/merge-patch+json &&
	code_is 200 &&
	ksim_curl -o t.json -H "$T" $NS/pods/pw &&
	jq -e ".rows[0].cells[3] == \"2 (15m ago)\"" t.json
'

test_expect_success 'tables: events (Name last, at priority 1), nodes, role bindings, PVCs, kinds with the default table' '
	T="Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json" &&
	ksim_curl -o t.json -H "$T" $NS/events &&
	cols t.json >actual &&
	echo "[[\"Last Seen\",0],[\"Type\",0],[\"Reason\",0],[\"Object\",0],[\"Subobject\",1],[\"Source\",1],[\"Message\",0],[\"First Seen\",1],[\"Count\",1],[\"Name\",1]]" >expect &&
	test_cmp expect actual &&
	jq -e ".rows[] | select(.cells[9] == \"e1\") | .cells == [\"<unknown>\", \"Normal\", \"Tested\", \"configmap/x\", \"\", \"me\", \"hello\", \"<unknown>\", 1, \"e1\"]" t.json &&
	ksim_curl -o t.json -H "$T" /apis/events.k8s.io/v1/namespaces/default/events &&
	jq -e ".rows[] | select(.cells[9] == \"e3\") | .cells[1:9] == [\"Normal\", \"Done\", \"configmap/x\", \"\", \"example.com/c, i\", \"n\", .cells[0], 1] and (.cells[0] | test(\"^[0-9]+[ydhms]\"))" t.json &&
	ksim_curl -o t.json -H "$T" /api/v1/nodes &&
	cols t.json >actual &&
	echo "[[\"Name\",0],[\"Status\",0],[\"Roles\",0],[\"Age\",0],[\"Version\",0],[\"Internal-IP\",1],[\"External-IP\",1],[\"OS-Image\",1],[\"Kernel-Version\",1],[\"Container-Runtime\",1]]" >expect &&
	test_cmp expect actual &&
	req POST /apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings "{\"metadata\":{\"name\":\"rb\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"view\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"u1\"},{\"kind\":\"Group\",\"name\":\"g\"},{\"kind\":\"User\",\"name\":\"u2\"},{\"kind\":\"ServiceAccount\",\"name\":\"sa\",\"namespace\":\"ns1\"}]}" &&
	code_is 201 &&
	ksim_curl -o t.json -H "$T" /apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/rb &&
	cols t.json >actual &&
	echo "[[\"Name\",0],[\"Role\",0],[\"Age\",0],[\"Users\",1],[\"Groups\",1],[\"ServiceAccounts\",1]]" >expect &&
	test_cmp expect actual &&
	jq -e "(.rows[0].cells | del(.[2])) == [\"rb\", \"ClusterRole/view\", \"u1, u2\", \"g\", \"ns1/sa\"]" t.json &&
	req POST $NS/persistentvolumeclaims "{\"metadata\":{\"name\":\"pvc\"},\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}" &&
	code_is 201 &&
	ksim_curl -o t.json -H "$T" $NS/persistentvolumeclaims/pvc &&
	cols t.json >actual &&
	echo "[[\"Name\",0],[\"Status\",0],[\"Volume\",0],[\"Capacity\",0],[\"Access Modes\",0],[\"StorageClass\",0],[\"VolumeAttributesClass\",0],[\"Age\",0],[\"VolumeMode\",1]]" >expect &&
	test_cmp expect actual &&
	ksim_curl -o t.json -H "$T" /apis/rbac.authorization.k8s.io/v1/clusterroles &&
	jq -e "[.columnDefinitions[] | .name, .type] == [\"Name\", \"string\", \"Created At\", \"date\"]" t.json
'

test_expect_success 'scale subresource: get, merge patch, update with a stale resourceVersion; the selector as selector.String()' '
	S=/apis/apps/v1/namespaces/default/deployments/d/scale &&
	req GET $S && code_is 200 &&
	jq -e ".kind == \"Scale\" and .apiVersion == \"autoscaling/v1\" and .spec.replicas == 0 and .status.selector == \"a=b\"" out.json &&
	rv=$(jq -r .metadata.resourceVersion out.json) &&
	req PATCH $S "{\"spec\":{\"replicas\":4}}" application/merge-patch+json && code_is 200 &&
	jq -e ".spec.replicas == 4" out.json &&
	req GET /apis/apps/v1/namespaces/default/deployments/d && jq -e ".spec.replicas == 4" out.json &&
	req PUT $S "{\"kind\":\"Scale\",\"apiVersion\":\"autoscaling/v1\",\"metadata\":{\"name\":\"d\",\"resourceVersion\":\"$rv\"},\"spec\":{\"replicas\":2}}" &&
	code_is 409 &&
	ksim_curl -o v1.json /apis/apps/v1 &&
	jq -e "[.resources[] | select(.name == \"deployments/scale\")][0] | .kind == \"Scale\" and .group == \"autoscaling\"" v1.json &&
	req GET /apis/apps/v1/namespaces/default/deployments/wide/scale && code_is 200 &&
	jq -e ".status.selector == \"a=1,a0,b=2,c notin (x,y),!d\"" out.json
'

test_expect_success 'deleting a CRD removes its objects and its API' '
	req DELETE /apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com && code_is 200 &&
	ksim_curl -o /dev/null -w "%{http_code}\n" /apis/example.com/v1/namespaces/default/gadgets >code &&
	code_is 404 &&
	ksim_curl -o apis.json /apis &&
	jq -e "[.groups[].name] | index(\"example.com\") | not" apis.json &&
	req POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$(cat "$FIXTURES/crd-multi.json")" &&
	code_is 201 &&
	ksim_curl -o l.json /apis/example.com/v1/namespaces/default/gadgets &&
	jq -e ".items == []" l.json
'

test_expect_success 'health: ok; ?verbose lists the checks, then "NAME check passed"; exclude; one check' '
	for e in healthz livez readyz; do
		ksim_curl -o out.txt -w "%{http_code}\n" /$e >code &&
		code_is 200 && printf ok >expect && test_cmp expect out.txt &&
		ksim_curl -o out.txt -w "%{http_code} %{content_type}\n" "/$e?verbose" >code &&
		code_is "200 text/plain; charset=utf-8" &&
		head -n 3 out.txt >actual &&
		printf "[+]ping ok\n[+]log ok\n[+]etcd ok\n" >expect && test_cmp expect actual &&
		tail -n 1 out.txt >actual &&
		echo "$e check passed" >expect && test_cmp expect actual &&
		! grep -v "^\[+\][a-z0-9/-]* ok$" out.txt | grep -v "check passed$" || return 1
	done &&
	ksim_curl -o out.txt "/readyz?verbose" &&
	grep -x "\[+\]informer-sync ok" out.txt &&
	grep -x "\[+\]shutdown ok" out.txt &&
	ksim_curl -o out.txt "/livez?verbose" &&
	! grep -x -e "\[+\]informer-sync ok" -e "\[+\]shutdown ok" out.txt &&
	ksim_curl -o out.txt "/readyz?verbose&exclude=etcd&exclude=nope" &&
	grep -x "\[+\]etcd excluded: ok" out.txt &&
	tail -n 2 out.txt >actual &&
	printf "warn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n" >expect &&
	test_cmp expect actual &&
	ksim_curl -o out.txt -w "%{http_code}\n" /readyz/etcd >code &&
	code_is 200 && printf ok >expect && test_cmp expect out.txt &&
	ksim_curl -o out.txt -w "%{http_code}\n" /livez/shutdown >code &&
	code_is 404 &&
	kubectl get --raw "/readyz?verbose" >out.txt &&
	tail -n 1 out.txt >actual && echo "readyz check passed" >expect && test_cmp expect actual
'

test_expect_success 'unknown paths are a plain-text 404' '
	ksim_curl -o out.txt -w "%{http_code}\n" /api/v1/nothings >code &&
	code_is 404 && echo "404 page not found" >expect && test_cmp expect out.txt
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

ksim_start --tls --token t0k3n

test_expect_success '--tls: https with the CA in the kubeconfig, kubectl works with it' '
	case "$KSIM_URL" in https://127.0.0.1:*) ;; *) false ;; esac &&
	jq -r ".clusters[0].cluster[\"certificate-authority-data\"]" "$KUBECONFIG" | base64 -d >ca.pem &&
	curl -sS --cacert ca.pem -H "Authorization: Bearer t0k3n" -o ns.json "$KSIM_URL/api/v1/namespaces" &&
	jq -e ".kind == \"NamespaceList\"" ns.json &&
	timeout 30 kubectl get ns default -o name >out &&
	echo namespace/default >expect && test_cmp expect out
'

# curl without the admin token: H is an extra header (a token) or empty
anon () {
	curl -k -sS -m 10 -o out.txt -w "%{http_code}\n" ${H:+-H "$H"} "$@" >code
}

test_expect_success 'health with a token not known: 401 Unauthorized, as every request (authentication comes first)' '
	H="Authorization: Bearer wrong" &&
	printf "%s\n" "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}" >expect &&
	for p in /healthz /livez /readyz "/healthz?verbose" "/readyz?verbose&exclude=etcd" /readyz/etcd /livez/ping /readyz/nope; do
		anon "$KSIM_URL$p" && code_is 401 && test_cmp expect out.txt || return 1
	done
'

test_expect_success 'health without a token (system:anonymous): the three paths, verbose too; a single check is 403' '
	H= &&
	for p in /healthz /livez /readyz; do
		anon "$KSIM_URL$p" && code_is 200 && printf ok >expect && test_cmp expect out.txt &&
		anon "$KSIM_URL$p?verbose" && code_is 200 &&
		tail -n 1 out.txt >actual && echo "${p#/} check passed" >expect && test_cmp expect actual || return 1
	done &&
	anon "$KSIM_URL/readyz/etcd" && code_is 403 &&
	jq -c . out.txt >actual &&
	echo "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/readyz/etcd\\\"\",\"reason\":\"Forbidden\",\"details\":{},\"code\":403}" >expect &&
	test_cmp expect actual &&
	anon "$KSIM_URL/livez/nope" && code_is 403 &&
	anon -X POST "$KSIM_URL/healthz" && code_is 403 &&
	jq -e ".message == \"forbidden: User \\\"system:anonymous\\\" cannot post path \\\"/healthz\\\"\"" out.txt &&
	anon "$KSIM_URL/version" && code_is 200 &&
	anon "$KSIM_URL/api" && code_is 403 &&
	H="Authorization: Bearer t0k3n" &&
	anon "$KSIM_URL/readyz/etcd" && code_is 200 && printf ok >expect && test_cmp expect out.txt &&
	anon "$KSIM_URL/livez/nope" && code_is 404
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

# Events expire as kube-apiserver's do (--event-ttl: each write gives one an
# etcd lease of that length).
ksim_start --event-ttl 4s
EV=/api/v1/namespaces/default/events

# A core/v1 Event named $1
event_json () {
	printf '{"metadata":{"name":"%s"},"involvedObject":{"kind":"Pod","namespace":"default","name":"p"},"reason":"R","message":"m","type":"Normal"}' "$1"
}

gone () {
	test "$(ksim_curl -s -o /dev/null -w "%{http_code}" "$EV/$1")" = 404
}

test_expect_success 'an Event is deleted --event-ttl after its last write; watchers see DELETED' '
	ksim_curl -f -o e1.json -X POST -H "Content-Type: application/json" -d "$(event_json e1)" $EV &&
	ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" -d "$(event_json e2)" $EV &&
	rv=$(jq -r .metadata.resourceVersion e1.json) &&
	{ ksim_curl -N -o w.out "$EV?watch=true&resourceVersion=$rv&timeoutSeconds=15" & } &&
	sleep 3 &&
	ksim_curl -f -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" -d "{\"count\":2}" $EV/e2 &&
	# e1 goes 4 s after it was made, e2 4 s after its patch, 3 s later
	test_wait_for 10 gone e1 &&
	! gone e2 &&
	test_wait_for 10 gone e2 &&
	wait &&
	jq -r "[.type, .object.metadata.name] | join(\" \")" w.out >actual &&
	printf "ADDED e2\nMODIFIED e2\nDELETED e1\nDELETED e2\n" >expect &&
	test_cmp expect actual
'

test_expect_success '--event-ttl takes a positive duration' '
	test_expect_code 100 ksim --event-ttl 0 2>err &&
	grep "invalid duration" err &&
	test_expect_code 100 ksim --event-ttl 1y 2>err &&
	grep "invalid duration" err
'

test_expect_success 'ksim with --event-ttl stops cleanly' '
	ksim_stop
'

test_done
