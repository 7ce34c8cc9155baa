#!/bin/sh
test_description='the image (scripts/image.sh): an OCI archive, run from its root filesystem read-only as uid 65532 against ksim, the example Available'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

# The image holds the normal build; the sanitizer pass of make check would
# only build the same image again.
test_normal_pass_only 'the image is built from the normal build'
test "$(id -u)" = 0 || test_skip_all 'building and running the image needs root (file owners, chroot, mounts)'
for t in mmdebstrap umoci skopeo unshare chroot setpriv; do
	command -v $t >/dev/null || test_skip_all "no $t (make deps installs it)"
done
"$PROJECT_ROOT/scripts/image.sh" --can-build 2>reason ||
	test_skip_all "the image cannot be built here: $(cat reason)"

R=$TRASH/rootfs
TOOLS="iot-operator kwatch ireconcile kapply kstatus"

test_expect_success 'scripts/image.sh writes the OCI archive and says what takes the space' '
	IMAGE_OUT="$TRASH/image.tar" "$PROJECT_ROOT/scripts/image.sh" >sizes 2>image.err &&
	test -s image.tar &&
	grep "wrote .*image.tar (iot-operator:latest): [0-9]* bytes compressed, [0-9]* unpacked" image.err &&
	grep "^ *[0-9][0-9]*  iot-operator ([0-9]*)$" sizes &&
	grep "^ *[0-9][0-9]*  libcurl4 (1)$" sizes
'

test_expect_success 'the archive: skopeo reads it; docker load finds manifest.json, containerd index.json' '
	skopeo inspect --config oci-archive:image.tar >config.json &&
	jq -c "[.config.User, .config.Entrypoint, .config.ExposedPorts, .os, .architecture]" config.json >actual &&
	echo "[\"65532:65532\",[\"/usr/bin/iot-operator\"],{\"60000/tcp\":{}},\"linux\",\"amd64\"]" >expect &&
	test_cmp expect actual &&
	mkdir oci && tar -C oci -xf image.tar &&
	jq -r ".manifests[0].annotations[\"io.containerd.image.name\"]" oci/index.json >actual &&
	echo docker.io/library/iot-operator:latest >expect &&
	test_cmp expect actual &&
	jq -r ".[0].RepoTags[0], .[0].Config, .[0].Layers[]" oci/manifest.json >paths &&
	head -n 1 paths >actual &&
	echo iot-operator:latest >expect &&
	test_cmp expect actual &&
	for p in $(sed 1d paths); do test -s "oci/$p" || return 1; done
'

if command -v podman >/dev/null; then
	# podman wants its runroot at most 50 characters long: a short one in /tmp
	test_expect_success 'podman load takes it (storage of its own)' '
		run=$(mktemp -d /tmp/kop-podman.XXXXXX) &&
		test_when_finished "rm -rf \"$run\"" &&
		podman --root "$TRASH/podman" --runroot "$run" --storage-driver vfs \
			load -i image.tar >podman.out 2>&1 &&
		grep "Loaded image: docker.io/library/iot-operator:latest" podman.out
	'
fi

# The layers as a container runtime lays them out.
test_expect_success 'unpacked: the tools, user 65532, no package manager, no docs' '
	mkdir "$R" &&
	for l in $(jq -r ".[0].Layers[]" oci/manifest.json); do
		tar -C "$R" --numeric-owner -xzf "oci/$l" || return 1
	done &&
	for t in $TOOLS; do test -x "$R/usr/bin/$t" || return 1; done &&
	test -d "$R/usr/share/iot-operator/pipeline/iotservice" &&
	grep "^nonroot:x:65532:65532:" "$R/etc/passwd" &&
	grep "^nonroot:x:65532:" "$R/etc/group" &&
	test -s "$R/etc/ssl/certs/ca-certificates.crt" &&
	for f in usr/bin/dpkg usr/bin/apt var/lib/dpkg var/lib/apt etc/apt usr/share/doc usr/share/man \
		usr/share/locale usr/bin/perl bin/sh usr/bin/ksim; do
		if test -e "$R/$f" || test -L "$R/$f"; then echo "$f is in the image"; return 1; fi
	done
'

test_expect_success 'inside the root filesystem: every library of every tool found, --help runs as 65532' '
	for t in $TOOLS; do
		chroot "$R" /lib64/ld-linux-x86-64.so.2 --list /usr/bin/$t >ldd.$t || return 1
		if grep "not found" ldd.$t; then return 1; fi
		chroot --userspec=65532:65532 "$R" /usr/bin/$t --help >help.$t 2>&1 || return 1
		grep "^usage: $t" help.$t || return 1
	done
'

e2e_ksim_start

# The ServiceAccount's files as the kubelet mounts them.
SA=$TRASH/serviceaccount
mkdir -p "$SA" &&
jq -r '.clusters[0].cluster["certificate-authority-data"]' "$KSIM_CONFIG" | base64 -d >"$SA/ca.crt" &&
printf operator-token >"$SA/token" &&
printf %s "$O" >"$SA/namespace" || exit 1
KSIM_PORT=${KSIM_URL##*:}

# In a new mount and pid namespace: the root filesystem bound read-only,
# /proc, /dev, /tmp (the emptyDir) and the ServiceAccount's files
# mounted as the kubelet does; then iot-operator as PID 1 under the
# Deployment's user and group, without new privileges, its environment only
# what the Deployment gives it (plus the in-cluster variables).
cat >run-pod.sh <<'EOF'
set -e
r=$1 sa=$2 uid=$3 gid=$4
shift 4
mount --make-rprivate /
mount --bind "$r" "$r"
mount -t proc proc "$r/proc"
# /dev as runc makes it: a tmpfs, the nodes, the /proc/self/fd links.
mount -t tmpfs -o mode=755 tmpfs "$r/dev"
for n in null zero full random urandom tty; do
	: >"$r/dev/$n"
	mount --bind "/dev/$n" "$r/dev/$n"
done
ln -s /proc/self/fd "$r/dev/fd"
ln -s /proc/self/fd/0 "$r/dev/stdin"
ln -s /proc/self/fd/1 "$r/dev/stdout"
ln -s /proc/self/fd/2 "$r/dev/stderr"
mount -t tmpfs -o size=16m,mode=1777 tmpfs "$r/tmp"
mount --bind "$sa" "$r/var/run/secrets/kubernetes.io/serviceaccount"
mount -o remount,bind,ro "$sa" "$r/var/run/secrets/kubernetes.io/serviceaccount"
mount -o remount,bind,ro "$r"
exec setpriv --no-new-privs chroot --userspec="$uid:$gid" --groups= "$r" "$@"
EOF

test_expect_success 'setup: deploy/ as the admin; the pod as deploy/operator.yaml has it' '
	e2e_install &&
	ksim_curl -o deploy.json /apis/apps/v1/namespaces/$O/deployments/iot-operator &&
	jq -e ".spec.template.spec.securityContext.runAsUser == 65532 and
		.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem and
		.spec.template.spec.containers[0].volumeMounts == [{name: \"tmp\", mountPath: \"/tmp\"}]" deploy.json &&
	mkdir -p "$R/var/run/secrets/kubernetes.io/serviceaccount"
'

# The container: the image's env, the Deployment's args (metrics on a free
# loopback port, not :60000, which other runs may hold) and env (fieldRefs
# resolved; an entry with neither value nor valueFrom is empty, as a kubelet sets it).
pod_start () {
	jq -r ".config.Env[]" config.json >env &&
	jq -r '.spec.template.spec.containers[0].args[] | sub("^--metrics-addr=:60000$"; "--metrics-addr=127.0.0.1:0")' \
		deploy.json >args &&
	jq -r --arg ns "$O" '.spec.template.spec.containers[0].env[] |
		.name + "=" + (if has("value") or (has("valueFrom") | not) then .value // ""
			else .valueFrom.fieldRef.fieldPath | if . == "metadata.namespace" then $ns
			elif . == "metadata.name" then "iot-operator-pod" elif . == "spec.serviceAccountName" then "iot-operator"
			else error("unknown fieldRef \(.)") end end)' \
		deploy.json >>env &&
	echo "KUBERNETES_SERVICE_HOST=127.0.0.1" >>env &&
	echo "KUBERNETES_SERVICE_PORT=$KSIM_PORT" >>env &&
	uid=$(jq .spec.template.spec.securityContext.runAsUser deploy.json) &&
	gid=$(jq .spec.template.spec.securityContext.runAsGroup deploy.json) &&
	echo pod >>"$TRASH/e2e.operators" &&
	(
		# shellcheck disable=SC2046
		env -i $(cat env) "$(command -v unshare)" --mount --pid --fork --kill-child \
			/bin/sh "$TRASH/run-pod.sh" "$R" "$SA" "$uid" "$gid" /usr/bin/iot-operator $(cat args) \
			</dev/null >/dev/null 2>>"$TRASH/pod.err" &
		echo $! >"$TRASH/pod.pid.tmp" && mv "$TRASH/pod.pid.tmp" "$TRASH/pod.pid"
		wait $!
		echo $? >"$TRASH/pod.code.tmp" && mv "$TRASH/pod.code.tmp" "$TRASH/pod.code"
	) >/dev/null 2>&1 &
	test_wait_for 5 test -s "$TRASH/pod.pid"
}

# The operator: unshare's child (PID 1 of its namespace).
pod_operator () {
	cat /proc/"$(cat "$TRASH/pod.pid")"/task/*/children 2>/dev/null | awk "{ print \$1 }"
}

test_expect_success 'the operator from the image leads, its pipeline running from /usr/share/iot-operator' '
	pod_start &&
	test_wait_for 20 grep -q "initial lists are in" pod.err &&
	pid=$(pod_operator) && test -n "$pid" &&
	grep "^Uid:	65532	65532	65532	65532$" /proc/$pid/status &&
	grep "^Gid:	65532	65532	65532	65532$" /proc/$pid/status &&
	grep "^Groups:[[:space:]]*$" /proc/$pid/status &&
	grep "^NoNewPrivs:	1$" /proc/$pid/status &&
	awk "\$5 == \"/\" { print \$6 }" /proc/$pid/mountinfo >root.opts &&
	grep "^ro," root.opts &&
	ksim_curl -o lease.json /apis/coordination.k8s.io/v1/namespaces/$O/leases/iot-operator-lock &&
	jq -e ".spec.holderIdentity | startswith(\"iot-operator-pod_\")" lease.json
'

test_expect_success 'the example reaches Available' '
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	test_wait_for 30 children_there &&
	test_wait_for 30 status_is Available
'

test_expect_success 'SIGTERM: the operator drains and exits 0' '
	kill -TERM "$(pod_operator)" &&
	test_wait_for 20 test -f pod.code &&
	echo 0 >expect &&
	test_cmp expect pod.code
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
