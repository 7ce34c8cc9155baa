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

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
