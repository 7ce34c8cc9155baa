#!/bin/sh
test_description='ksim: answers compared with recordings of a real kube-apiserver (generated values aside)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

R="$TEST_DATA/recordings"
SCRUB="$FIXTURES/scrub.jq"

# The body of a recorded HTTP exchange (after the blank line).
body_of () {
	tr -d '\r' <"$1" | sed '1,/^$/d'
}

# Compares two JSON documents after scrubbing generated values.
same_json () {
	jq -S -f "$SCRUB" "$1" >a.scrubbed &&
	jq -S -f "$SCRUB" "$2" >b.scrubbed &&
	diff -u a.scrubbed b.scrubbed
}

# POST/PUT/PATCH with a JSON body: method path body [content-type]; body in out.json, code in code.
req () {
	ksim_curl -o out.json -w "%{http_code}\n" -X "$1" -H "Content-Type: ${4:-application/json}" -d "$3" "$2" >code
}

ksim_start

test_expect_success 'setup: namespace rec-cr and the recorded CRD' '
	req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"rec-cr\"}}" &&
	echo 201 >expect && test_cmp expect code &&
	jq -c "{apiVersion, kind, metadata: {name: .metadata.name}, spec}" "$R/custom/crd-established.json" >crd.json &&
	req POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$(cat crd.json)" &&
	test_cmp expect code &&
	jq -e ".status.conditions | map(select(.status == \"True\") | .type) | sort == [\"Established\", \"NamesAccepted\"]" out.json
'

test_expect_success 'the CRD as stored matches the recorded Established CRD' '
	ksim_curl -o crd-live.json /apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.example.org &&
	jq "{kind, apiVersion, spec, status: (.status | .conditions |= map({type, status, reason, message}))}" "$R/custom/crd-established.json" >expect.json &&
	jq "{kind, apiVersion, spec, status: (.status | .conditions |= map({type, status, reason, message}))}" crd-live.json >actual.json &&
	same_json expect.json actual.json
'

test_expect_success '404 NotFound' '
	ksim_curl -o out.json -w "%{http_code}\n" /api/v1/namespaces/rec-cr/configmaps/nope >code &&
	echo 404 >expect && test_cmp expect code &&
	body_of "$R/errors/404-not-found.http.txt" >expect.json &&
	same_json expect.json out.json &&
	# byte for byte: the compact body and its newline (Content-Length 188)
	cmp expect.json out.json
'

test_expect_success '409 AlreadyExists' '
	req POST /api/v1/namespaces/rec-cr/configmaps "{\"metadata\":{\"name\":\"x\"},\"data\":{\"k\":\"v\"}}" &&
	cp out.json x1.json &&
	req POST /api/v1/namespaces/rec-cr/configmaps "{\"metadata\":{\"name\":\"x\"},\"data\":{\"k\":\"v\"}}" &&
	echo 409 >expect && test_cmp expect code &&
	body_of "$R/errors/409-already-exists.http.txt" >expect.json &&
	same_json expect.json out.json
'

test_expect_success '409 Conflict on a stale resourceVersion' '
	jq -c ".data.k = \"w\"" x1.json >x2.json &&
	req PUT /api/v1/namespaces/rec-cr/configmaps/x "$(cat x2.json)" &&
	echo 200 >expect && test_cmp expect code &&
	jq -c ".data.k = \"z\"" x1.json >x3.json &&
	req PUT /api/v1/namespaces/rec-cr/configmaps/x "$(cat x3.json)" &&
	echo 409 >expect && test_cmp expect code &&
	body_of "$R/errors/409-conflict-stale.http.txt" >expect.json &&
	same_json expect.json out.json
'

test_expect_success '422 Invalid from the CRD schema (enum and type)' '
	req POST /apis/test.example.org/v1/namespaces/rec-cr/widgets \
		"{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"bad\"},\"spec\":{\"color\":\"pink\",\"size\":\"string\"}}" &&
	echo 422 >expect && test_cmp expect code &&
	body_of "$R/errors/422-invalid.http.txt" >expect.json &&
	same_json expect.json out.json
'

test_expect_success '415 for a strategic merge patch on a custom resource' '
	req POST /apis/test.example.org/v1/namespaces/rec-cr/widgets \
		"{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w1\"},\"spec\":{\"color\":\"red\"}}" &&
	echo 201 >expect && test_cmp expect code &&
	jq -e ".spec.size == 3 and .metadata.generation == 1" out.json &&
	req PATCH /apis/test.example.org/v1/namespaces/rec-cr/widgets/w1 "{\"spec\":{\"size\":4}}" \
		application/strategic-merge-patch+json &&
	echo 415 >expect && test_cmp expect code &&
	body_of "$R/errors/415-or-404-smp-on-cr.http.txt" >expect.json &&
	same_json expect.json out.json
'

test_expect_success '409 server-side apply conflict, then the forced apply' '
	req PATCH "/api/v1/namespaces/rec-cr/configmaps/y?fieldManager=one" \
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"y\"},\"data\":{\"k\":\"mine\"}}" \
		application/apply-patch+yaml &&
	echo 201 >expect && test_cmp expect code &&
	req PATCH "/api/v1/namespaces/rec-cr/configmaps/y?fieldManager=two" \
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"y\"},\"data\":{\"k\":\"theirs\"}}" \
		application/apply-patch+yaml &&
	echo 409 >expect && test_cmp expect code &&
	body_of "$R/errors/409-apply-conflict.http.txt" >expect.json &&
	same_json expect.json out.json &&
	req PATCH "/api/v1/namespaces/rec-cr/configmaps/y?fieldManager=two&force=true" \
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"y\"},\"data\":{\"k\":\"theirs\"}}" \
		application/apply-patch+yaml &&
	echo 200 >expect && test_cmp expect code &&
	body_of "$R/errors/200-apply-forced.http.txt" | jq ".metadata.name = \"y\"" >expect.json &&
	same_json expect.json out.json
'

test_expect_success '403 when creating in a terminating namespace' '
	req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"rec-term\"}}" &&
	req POST /api/v1/namespaces/rec-term/configmaps \
		"{\"metadata\":{\"name\":\"held\",\"finalizers\":[\"example.org/hold\"]}}" &&
	ksim_curl -o del.json -X DELETE /api/v1/namespaces/rec-term &&
	jq -e ".status.phase == \"Terminating\" and .metadata.deletionTimestamp" del.json &&
	req POST /api/v1/namespaces/rec-term/configmaps "{\"metadata\":{\"name\":\"late\"}}" &&
	echo 403 >expect && test_cmp expect code &&
	body_of "$R/errors/403-namespace-terminating.http.txt" >expect.json &&
	same_json expect.json out.json
'

# The namespace controller deletes a terminating namespace's contents on its
# own time, as kube-controller-manager does: the held object is waited for.
held_deleting () {
	ksim_curl -o held.json /api/v1/namespaces/rec-term/configmaps/held &&
	jq -e ".metadata.deletionTimestamp" held.json
}

test_expect_success 'the terminating namespace goes once the last finalizer is removed' '
	test_wait_for 10 held_deleting &&
	req PATCH /api/v1/namespaces/rec-term/configmaps/held "[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]" \
		application/json-patch+json &&
	test_wait_for 10 sh -c "test \"\$(curl -s -o /dev/null -w \"%{http_code}\" $KSIM_URL/api/v1/namespaces/rec-term)\" = 404"
'

test_expect_success 'list page with limit: shape of the recorded page' '
	for n in a b c; do
		req POST /api/v1/namespaces/rec-cr/configmaps "{\"metadata\":{\"name\":\"page-$n\"}}" || return 1
	done &&
	ksim_curl -o page.json "/api/v1/namespaces/rec-cr/configmaps?limit=1" &&
	body_of "$R/watch/list-page.http.txt" >rec-page.json &&
	jq -S "{kind, apiVersion, md: (.metadata | keys), item: (.items[0] | keys), n: (.items | length)}" rec-page.json >expect.json &&
	jq -S "{kind, apiVersion, md: (.metadata | keys), item: (.items[0] | keys - [\"data\"]), n: (.items | length)}" page.json >actual.json &&
	jq -S ".item -= [\"data\"]" expect.json >e2.json &&
	test_cmp e2.json actual.json &&
	jq -e ".metadata.remainingItemCount == 5" page.json	# x, y, page-a..c and kube-root-ca.crt, less the one listed
'

test_expect_success 'continue walks every page at one resourceVersion' '
	ksim_curl -o all.json /api/v1/namespaces/rec-cr/configmaps &&
	jq -r "[.items[].metadata.name] | join(\" \")" all.json >expect &&
	: >names && tok= && rv= &&
	while :; do
		ksim_curl -o p.json "/api/v1/namespaces/rec-cr/configmaps?limit=2${tok:+&continue=$tok}" &&
		jq -r ".items[].metadata.name" p.json >>names &&
		if test -n "$rv"; then test "$rv" = "$(jq -r .metadata.resourceVersion p.json)" || return 1; fi &&
		rv=$(jq -r .metadata.resourceVersion p.json) &&
		tok=$(jq -r ".metadata.continue // empty" p.json) &&
		test -n "$tok" || break
	done &&
	tr "\n" " " <names | sed "s/ $//" >actual && echo >>actual &&
	test_cmp expect actual
'

test_expect_success 'an expired continue token is 410 with a fresh token' '
	ksim_curl -o p1.json "/api/v1/namespaces/rec-cr/configmaps?limit=1" &&
	tok=$(jq -r .metadata.continue p1.json) &&
	ksim_admin compact &&
	ksim_curl -o out.json -w "%{http_code}\n" "/api/v1/namespaces/rec-cr/configmaps?limit=1&continue=$tok" >code &&
	echo 410 >expect && test_cmp expect code &&
	body_of "$R/watch/expired-continue.http.txt" >expect.json &&
	same_json expect.json out.json &&
	tok2=$(jq -r .metadata.continue out.json) &&
	ksim_curl -o p2.json "/api/v1/namespaces/rec-cr/configmaps?limit=1&continue=$tok2" &&
	jq -e ".items | length == 1" p2.json
'

test_expect_success 'a watch from a compacted resourceVersion: 200, chunked, one ERROR 410 event' '
	ksim_curl -D headers -o out.json "/api/v1/namespaces/rec-cr/configmaps?watch=true&resourceVersion=2" &&
	tr -d "\r" <headers >h &&
	grep "^HTTP/1.1 200" h &&
	grep -i "^Transfer-Encoding: chunked" h &&
	grep -i "^Content-Type: application/json" h &&
	body_of "$R/watch/expired-rv.http.txt" >expect.json &&
	same_json expect.json out.json &&
	test $(wc -l <out.json) = 1
'

test_expect_success 'watch framing: chunked, one compact event and a newline per event, zero chunk at the end' '
	rv=$(ksim_curl /api/v1/namespaces/rec-cr/configmaps | jq -r .metadata.resourceVersion) &&
	rm -f raw.out &&
	{ ksim_curl --raw -N -D wh -o raw.out "/api/v1/namespaces/rec-cr/configmaps?watch=true&resourceVersion=$rv" & } &&
	sleep 0.3 &&
	req POST /api/v1/namespaces/rec-cr/configmaps "{\"metadata\":{\"name\":\"framed\"},\"data\":{\"a\":\"b\"}}" &&
	test_wait_for 5 grep -q framed raw.out &&
	ksim_admin cut-watches &&
	wait &&
	tr -d "\r" <raw.out >raw &&
	sed -n 1p raw >size && grep -E "^[0-9a-fA-F]+$" size &&
	sed -n 2p raw >event &&
	test $(( 0x$(cat size) )) = $(wc -c <event) &&
	jq -e "(.type == \"ADDED\") and (.object.metadata.name == \"framed\") and (.object.kind == \"ConfigMap\")" event &&
	jq -c . event >compact && test_cmp compact event &&
	tail -n 2 raw >end && printf "0\n\n" >expect && test_cmp expect end &&
	tr -d "\r" <"$R/watch/chunked-raw-http.txt" | sed "1,/^$/d" | tail -n 2 >rec-end && test_cmp expect rec-end &&
	tr -d "\r" <wh | grep -i "^Cache-Control: no-cache, private"
'

# kube-apiserver flushes after each event (the recording: one event a chunk),
# even when several are ready at once, as a replay from the history is.
test_expect_success 'watch framing: one event a chunk, also when several are sent together' '
	rv=$(ksim_curl /api/v1/namespaces/rec-cr/configmaps | jq -r .metadata.resourceVersion) &&
	for n in c1 c2 c3; do
		req POST /api/v1/namespaces/rec-cr/configmaps "{\"metadata\":{\"name\":\"$n\"}}" || return 1
	done &&
	rm -f raw3.out &&
	{ ksim_curl --raw -N -o raw3.out "/api/v1/namespaces/rec-cr/configmaps?watch=true&resourceVersion=$rv" & } &&
	test_wait_for 5 grep -q c3 raw3.out &&
	ksim_admin cut-watches &&
	wait &&
	tr -d "\r" <raw3.out >raw3 &&
	# each chunk: its size, the event and its newline, the chunk CRLF (an empty line)
	awk "NR % 3 == 1" raw3 >sizes && awk "NR % 3 == 2" raw3 >chunks && awk "NR % 3 == 0 && length" raw3 >gaps &&
	test_cmp /dev/null gaps &&
	printf "c1\nc2\nc3\n" >expect &&
	head -n 3 chunks | jq -r .object.metadata.name >actual && test_cmp expect actual &&
	head -n 3 sizes | while read -r size; do
		read -r chunk <&5 &&
		test $(( 0x$size )) = $(( $(printf "%s" "$chunk" | wc -c) + 1 )) || exit 1
	done 5<chunks
'

test_expect_success 'discovery: /api and /version are shaped as recorded' '
	ksim_curl -o api.json /api &&
	same_json "$R/discovery/api.json" api.json &&
	ksim_curl -o version.json /version &&
	jq -S keys "$R/discovery/version.json" >expect && jq -S keys version.json >actual && test_cmp expect actual &&
	# written as WriteRawJSON does: indented by two spaces, no newline at the end
	sed "s/: \".*\"/: \"x\"/" "$R/discovery/version.json" >rec.shape &&
	sed "s/: \".*\"/: \"x\"/" version.json >our.shape &&
	cmp rec.shape our.shape
'

test_expect_success 'discovery: /api/v1 and /apis/apps/v1 entries match the recorded ones' '
	ksim_curl -o v1.json /api/v1 &&
	ksim_curl -o apps.json /apis/apps/v1 &&
	for f in v1:api-v1 apps:apis-apps-v1; do
		ours=${f%%:*}.json && rec="$R/discovery/${f#*:}.json" &&
		jq -S "[.resources[] | {name, namespaced, kind, verbs: (.verbs | sort), shortNames, categories}]" $ours >mine &&
		jq -S --slurpfile m mine "[.resources[] | select(.name as \$n | \$m[0] | map(.name) | index(\$n)) | {name, namespaced, kind, verbs: (.verbs | sort), shortNames, categories}]" "$rec" >theirs &&
		jq -S "sort_by(.name)" mine >a && jq -S "sort_by(.name)" theirs >b &&
		test_cmp b a || return 1
	done &&
	jq -e ".resources | length >= 10" v1.json &&
	for f in v1:api-v1 apps:apis-apps-v1; do
		jq -c "keys_unsorted" "$R/discovery/${f#*:}.json" >expect &&
		jq -c "keys_unsorted" ${f%%:*}.json >actual &&
		test_cmp expect actual || return 1
	done
'

test_expect_success 'discovery: the custom group matches the recording' '
	ksim_curl -o g.json /apis/test.example.org/v1 &&
	jq -S ".resources |= map(.verbs |= sort)" "$R/discovery/apis-test.example.org-v1.json" >expect.json &&
	jq -S ".resources |= map(.verbs |= sort)" g.json >actual.json &&
	same_json expect.json actual.json &&
	ksim_curl -o apis.json /apis &&
	jq -e "[.groups[] | select(.name == \"test.example.org\")][0] == {name: \"test.example.org\", versions: [{groupVersion: \"test.example.org/v1\", version: \"v1\"}], preferredVersion: {groupVersion: \"test.example.org/v1\", version: \"v1\"}}" apis.json
'

test_expect_success 'OpenAPI v3: index entries and a PATCH operation with fieldValidation' '
	ksim_curl -o idx.json /openapi/v3 &&
	jq -e ".paths[\"apis/test.example.org/v1\"].serverRelativeURL | startswith(\"/openapi/v3/apis/test.example.org/v1?hash=\")" idx.json &&
	url=$(jq -r ".paths[\"apis/test.example.org/v1\"].serverRelativeURL" idx.json) &&
	ksim_curl -o doc.json "$url" &&
	p="/apis/test.example.org/v1/namespaces/{namespace}/widgets/{name}" &&
	jq -S --arg p "$p" ".paths[\$p].patch | {gvk: .[\"x-kubernetes-group-version-kind\"], fv: [.parameters[] | select(.name == \"fieldValidation\") | .in], ct: (.requestBody.content | keys)}" "$R/discovery/openapi-v3-test.example.org-v1.json" >expect.json &&
	jq -S --arg p "$p" ".paths[\$p].patch | {gvk: .[\"x-kubernetes-group-version-kind\"], fv: [.parameters[] | select(.name == \"fieldValidation\") | .in], ct: (.requestBody.content | keys)}" doc.json >actual.json &&
	test_cmp expect.json actual.json
'

test_expect_success 'OpenAPI v3: the custom kind, its list and the metadata they refer to, as recorded' '
	url=$(jq -r ".paths[\"apis/test.example.org/v1\"].serverRelativeURL" idx.json) &&
	ksim_curl -o doc.json "$url" &&
	jq -r ".components.schemas | keys[]" doc.json >keys &&
	grep -x org.example.test.v1.Widget keys &&
	grep -x org.example.test.v1.WidgetList keys &&
	grep -x io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta keys &&
	while read -r k; do
		jq -S --arg k "$k" ".components.schemas[\$k]" "$R/discovery/openapi-v3-test.example.org-v1.json" >expect.json &&
		jq -S --arg k "$k" ".components.schemas[\$k]" doc.json >actual.json &&
		test_cmp expect.json actual.json || return 1
	done <keys
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

ksim_start --token s3cret

test_expect_success '--token: anonymous requests are 403 as recorded, wrong tokens 401' '
	curl -sS -k -o out.json -w "%{http_code}\n" "$KSIM_URL/api/v1/namespaces" >code &&
	echo 403 >expect && test_cmp expect code &&
	body_of "$R/errors/401-or-403-anonymous.http.txt" >expect.json &&
	same_json expect.json out.json &&
	curl -sS -k -o out.json -w "%{http_code}\n" -H "Authorization: Bearer wrong" "$KSIM_URL/api/v1/namespaces" >code &&
	echo 401 >expect && test_cmp expect code &&
	jq -e ".reason == \"Unauthorized\" and .code == 401" out.json &&
	ksim_curl -o ok.json -w "%{http_code}\n" /api/v1/namespaces >code &&
	echo 200 >expect && test_cmp expect code &&
	jq -e ".users[0].user.token == \"s3cret\"" "$KUBECONFIG"
'

# kubectl sends no bearer token over plain HTTP (every call would be
# system:anonymous): --token implies --tls, and kubectl 1.27 and 1.33 are
# the admin with the kubeconfig ksim writes.
test_expect_success '--token implies --tls: kubectl 1.27 and 1.33 authenticate with the written kubeconfig' '
	case "$KSIM_URL" in https://127.0.0.1:*) ;; *) false ;; esac &&
	jq -e ".clusters[0].cluster[\"certificate-authority-data\"] | length > 0" "$KUBECONFIG" &&
	for k in kubectl.1.27 kubectl.1.33; do
		timeout 30 "/usr/lib/google-cloud-sdk/bin/$k" get ns default -o name >out || return 1
		echo namespace/default >expect && test_cmp expect out || return 1
	done
'

test_expect_success '--token: anonymous gets /version only, not the OpenAPI documents' '
	for path in /version /openapi/v2 /openapi/v3 /api
	do
		curl -sS -k -o /dev/null -w "%{http_code} $path\n" "$KSIM_URL$path" || return 1
	done >codes &&
	printf "200 /version\n403 /openapi/v2\n403 /openapi/v3\n403 /api\n" >expect &&
	test_cmp expect codes &&
	ksim_curl -o /dev/null -w "%{http_code}\n" /openapi/v2 >code &&
	echo 200 >expect && test_cmp expect code
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
