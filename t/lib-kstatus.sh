# Shared by kstatus's tests on ksim (t4004, t4006): Widgets of the test CRD
# (t3001-kapply-ksim/crd.yaml) in namespace ns, and their status lines.

# status_line NAME UID PHASE: a status operation for Widget ns/NAME
status_line () {
	printf '{"op":"status","primary":"ns/%s","object":{"apiVersion":"test.example.org/v1","kind":"Widget","metadata":{"name":"%s","namespace":"ns","uid":"%s"},"status":{"phase":"%s"}}}\n' \
		"$1" "$1" "$2" "$3"
}

# phase_of NAME: the stored status.phase of Widget ns/NAME ("" for none); NAME.json the object
phase_of () {
	timeout 30 kubectl get widgets.test.example.org "$1" -n ns -o json >"$1.json" &&
	jq -r ".status.phase // \"\"" "$1.json"
}

# widgets_setup: the CRD, namespace ns, Widgets w1 and w2; their uids in uid1 and uid2
widgets_setup () {
	{
		timeout 60 kapply -f "$TEST_DIRECTORY/t3001-kapply-ksim/crd.yaml" \
			-f "$TEST_DIRECTORY/t4001-kstatus-ksim/ns.yaml" >out 2>err ||
		timeout 60 kapply -f "$TEST_DIRECTORY/t4001-kstatus-ksim/ns.yaml" \
			-f "$TEST_DIRECTORY/t3001-kapply-ksim/crd.yaml" >out 2>err
	} &&
	phase_of w1 >/dev/null && phase_of w2 >/dev/null &&
	jq -r .metadata.uid w1.json >uid1 && jq -r .metadata.uid w2.json >uid2
}
