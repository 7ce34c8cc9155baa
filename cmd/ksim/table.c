/*
 * Table output (as=Table;g=meta.k8s.io): the columns and cells kubectl get
 * prints, for the built-in kinds as kube-apiserver's printers make them and
 * for custom kinds from additionalPrinterColumns; and a selector's string.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "types-priv.h"
#include "banned.h"

/* apimachinery's duration.HumanDuration. */
static void human_duration(long long s, char *buf, size_t len)
{
	long long m, h;

	if (s < -1) {
		snprintf(buf, len, "<invalid>");
		return;
	}
	if (s < 0)
		s = 0;
	if (s < 120) {
		snprintf(buf, len, "%llds", s);
		return;
	}
	m = s / 60;
	if (m < 10) {
		if (s % 60)
			snprintf(buf, len, "%lldm%llds", m, s % 60);
		else
			snprintf(buf, len, "%lldm", m);
		return;
	}
	if (m < 180) {
		snprintf(buf, len, "%lldm", m);
		return;
	}
	h = s / 3600;
	if (h < 8) {
		if (m % 60)
			snprintf(buf, len, "%lldh%lldm", h, m % 60);
		else
			snprintf(buf, len, "%lldh", h);
	} else if (h < 48) {
		snprintf(buf, len, "%lldh", h);
	} else if (h < 24 * 8) {
		if (h % 24)
			snprintf(buf, len, "%lldd%lldh", h / 24, h % 24);
		else
			snprintf(buf, len, "%lldd", h / 24);
	} else if (h < 24 * 365 * 2) {
		snprintf(buf, len, "%lldd", h / 24);
	} else if (h < 24 * 365 * 8) {
		if ((h / 24) % 365)
			snprintf(buf, len, "%lldy%lldd", h / 24 / 365, (h / 24) % 365);
		else
			snprintf(buf, len, "%lldy", h / 24 / 365);
	} else {
		snprintf(buf, len, "%lldy", h / 24 / 365);
	}
}

static jv age(jv obj, const char *path)
{
	const char *ts = ksim_str(obj, path);
	time_t t;
	char buf[32];

	if (!ts || kop_time_parse(ts, &t) < 0)
		return jv_string("<unknown>");
	human_duration((long long)(time(NULL) - t), buf, sizeof(buf));
	return jv_string(buf);
}

/* Value at a simple JSONPath (".spec.x", ".status.conditions[0].type"), or null. */
static jv json_path(jv obj, const char *path)
{
	jv cur = jv_copy(obj);
	const char *p = path;

	if (*p == '{')
		p++;
	while (*p && *p != '}') {
		if (*p == '.') {
			const char *s = ++p;
			char *key;

			while (*p && *p != '.' && *p != '[' && *p != '}')
				p++;
			key = kop_strndup(s, p - s);
			if (jv_get_kind(cur) == JV_KIND_OBJECT) {
				cur = jv_object_get(cur, jv_string(key));
			} else {
				jv_free(cur);
				cur = jv_invalid();
			}
			free(key);
		} else if (*p == '[') {
			long idx = strtol(p + 1, NULL, 10);

			while (*p && *p != ']')
				p++;
			if (*p)
				p++;
			if (jv_get_kind(cur) == JV_KIND_ARRAY) {
				int n = jv_array_length(jv_copy(cur));

				if (idx < 0)
					idx += n;
				cur = idx >= 0 && idx < n ? jv_array_get(cur, idx) : (jv_free(cur), jv_invalid());
			} else {
				jv_free(cur);
				cur = jv_invalid();
			}
		} else {
			break;
		}
		if (!jv_is_valid(cur))
			return jv_null();
	}
	return cur;
}

static jv col(const char *name, const char *type, const char *format, const char *desc, int priority)
{
	return JV_OBJECT(jv_string("name"), jv_string(name), jv_string("type"), jv_string(type), jv_string("format"),
			 jv_string(format), jv_string("description"), jv_string(desc), jv_string("priority"),
			 jv_number(priority));
}

static long num(jv obj, const char *a, const char *b, const char *c, long def)
{
	jv p = c ? JV_ARRAY(jv_string(a), jv_string(b), jv_string(c)) : JV_ARRAY(jv_string(a), jv_string(b));
	jv v = jv_getpath(jv_copy(obj), p);
	long r = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return r;
}

/* A number member of an object, or def. */
static long key_num(jv o, const char *key, long def)
{
	jv v = jv_get_kind(o) == JV_KIND_OBJECT ? jv_object_get(jv_copy(o), jv_string(key)) : jv_invalid();
	long r = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return r;
}

static jv fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static jv fmt(const char *f, ...)
{
	struct kop_buf b = KOP_BUF_INIT;
	va_list ap;
	jv s;

	va_start(ap, f);
	kop_buf_vaddf(&b, f, ap);
	va_end(ap);
	s = jv_string(b.buf ? b.buf : "");
	kop_buf_release(&b);
	return s;
}

static jv str_or(jv obj, const char *path, const char *def)
{
	const char *s = ksim_str(obj, path);

	return jv_string(s ? s : def);
}

static jv cell_value(jv v, const char *type)
{
	if (jv_get_kind(v) == JV_KIND_NULL)
		return v;
	if (!strcmp(type, "date") && jv_get_kind(v) == JV_KIND_STRING) {
		time_t t;
		char buf[32];

		if (kop_time_parse(jv_string_value(v), &t) == 0) {
			human_duration((long long)(time(NULL) - t), buf, sizeof(buf));
			jv_free(v);
			return jv_string(buf);
		}
	}
	if (jv_get_kind(v) == JV_KIND_OBJECT || jv_get_kind(v) == JV_KIND_ARRAY) {
		jv s = jv_dump_string(v, 0);

		return s;
	}
	return v;
}

static int obj_len(jv o, const char *key)
{
	jv v = jv_object_get(jv_copy(o), jv_string(key));
	int n = jv_get_kind(v) == JV_KIND_OBJECT ? jv_object_length(jv_copy(v)) : 0;

	jv_free(v);
	return n;
}

/* The array at a path (array of keys, consumed) in o, or an empty array. */
static jv arr_at(jv o, jv path)
{
	jv v = jv_getpath(jv_copy(o), path);

	if (jv_get_kind(v) == JV_KIND_ARRAY)
		return v;
	jv_free(v);
	return jv_array();
}

/* The strings of an array (consumed) joined with sep; "" when none. */
static jv joined(jv a, const char *sep)
{
	struct kop_buf b = KOP_BUF_INIT;
	int n = 0;
	jv s;

	jv_array_foreach(a, i, e) {
		if (jv_get_kind(e) == JV_KIND_STRING)
			kop_buf_addf(&b, "%s%s", n++ ? sep : "", jv_string_value(e));
		jv_free(e);
	}
	jv_free(a);
	s = jv_string(b.buf ? b.buf : "");
	kop_buf_release(&b);
	return s;
}

jv ksim_selector_string(jv sel)
{
	jv reqs, keys, ml, me, s;

	if (jv_get_kind(sel) != JV_KIND_OBJECT)
		return jv_string("");
	reqs = jv_array();
	keys = jv_array();
	ml = jv_object_get(jv_copy(sel), jv_string("matchLabels"));
	me = jv_object_get(jv_copy(sel), jv_string("matchExpressions"));
	if (jv_get_kind(ml) == JV_KIND_OBJECT) {
		jv_object_foreach(ml, k, v) {
			if (jv_get_kind(v) == JV_KIND_STRING) {
				reqs = jv_array_append(reqs, fmt("%s=%s", jv_string_value(k), jv_string_value(v)));
				keys = jv_array_append(keys, jv_copy(k));
			}
			jv_free(k);
			jv_free(v);
		}
	}
	if (jv_get_kind(me) == JV_KIND_ARRAY) {
		jv_array_foreach(me, i, e) {
			const char *key = ksim_str(e, "key"), *op = ksim_str(e, "operator");
			jv vals = jv_get_kind(e) == JV_KIND_OBJECT ? jv_object_get(jv_copy(e), jv_string("values")) : jv_null();
			int nv = jv_get_kind(vals) == JV_KIND_ARRAY ? jv_array_length(jv_copy(vals)) : 0;
			jv r = jv_invalid();

			if (!key || !op) {
				/* invalid */
			} else if ((!strcmp(op, "In") || !strcmp(op, "NotIn")) && nv > 0) {
				jv list = joined(jv_sort(jv_copy(vals), jv_copy(vals)), ",");

				r = fmt("%s %s (%s)", key, !strcmp(op, "In") ? "in" : "notin", jv_string_value(list));
				jv_free(list);
			} else if (!strcmp(op, "Exists") && !nv) {
				r = jv_string(key);
			} else if (!strcmp(op, "DoesNotExist") && !nv) {
				r = fmt("!%s", key);
			}
			jv_free(vals);
			if (!jv_is_valid(r)) {
				jv_free(e);
				jv_free(ml);
				jv_free(me);
				jv_free(reqs);
				jv_free(keys);
				return jv_invalid();
			}
			reqs = jv_array_append(reqs, r);
			keys = jv_array_append(keys, jv_string(key));
			jv_free(e);
		}
	}
	jv_free(ml);
	jv_free(me);
	s = joined(jv_sort(reqs, keys), ",");
	return s;
}

/* v (consumed) when a non-empty string, else def. */
static jv nonempty_or(jv v, const char *def)
{
	if (jv_get_kind(v) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(v)) > 0)
		return v;
	jv_free(v);
	return jv_string(def);
}

/* labels.FormatLabels of a map: "k=v" sorted by key, "<none>" when empty. */
static jv format_labels(jv o, jv path)
{
	jv m = jv_getpath(jv_copy(o), path), keys, parts, s;

	if (jv_get_kind(m) != JV_KIND_OBJECT || !jv_object_length(jv_copy(m))) {
		jv_free(m);
		return jv_string("<none>");
	}
	parts = jv_array();
	keys = jv_keys(jv_copy(m));
	jv_array_foreach(keys, i, k) {
		jv v = jv_object_get(jv_copy(m), jv_copy(k));

		parts = jv_array_append(parts, fmt("%s=%s", jv_string_value(k),
						   jv_get_kind(v) == JV_KIND_STRING ? jv_string_value(v) : ""));
		jv_free(v);
		jv_free(k);
	}
	jv_free(keys);
	jv_free(m);
	s = joined(parts, ",");
	return s;
}

/* Containers and Images of a pod template's containers (kubectl's layoutContainerCells). */
static void container_cells(jv o, jv *names, jv *images)
{
	jv cs = arr_at(o, JV_ARRAY(jv_string("spec"), jv_string("template"), jv_string("spec"), jv_string("containers")));
	struct kop_buf n = KOP_BUF_INIT, im = KOP_BUF_INIT;

	jv_array_foreach(cs, i, c) {
		const char *name = ksim_str(c, "name"), *image = ksim_str(c, "image");

		kop_buf_addf(&n, "%s%s", i ? "," : "", name ? name : "");
		kop_buf_addf(&im, "%s%s", i ? "," : "", image ? image : "");
		jv_free(c);
	}
	jv_free(cs);
	*names = jv_string(n.buf ? n.buf : "");
	*images = jv_string(im.buf ? im.buf : "");
	kop_buf_release(&n);
	kop_buf_release(&im);
}

/* Containers, Images and Selector (Deployments, ReplicaSets), appended to cells. */
static jv workload_cells(jv cells, jv o, int selector)
{
	jv names, images;

	container_cells(o, &names, &images);
	cells = jv_array_append(jv_array_append(cells, names), images);
	if (selector) {
		jv sel = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("selector")));
		jv s = ksim_selector_string(sel);

		jv_free(sel);
		cells = jv_array_append(cells, jv_is_valid(s) ? s : (jv_free(s), jv_string("<invalid>")));
	}
	return cells;
}

static jv pod_cells(jv o)
{
	jv cs = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("status"), jv_string("containerStatuses")));
	jv cn = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("containers")));
	jv gates = arr_at(o, JV_ARRAY(jv_string("spec"), jv_string("readinessGates")));
	jv conds = arr_at(o, JV_ARRAY(jv_string("status"), jv_string("conditions")));
	int total = jv_get_kind(cn) == JV_KIND_ARRAY ? jv_array_length(jv_copy(cn)) : 0, ready = 0;
	int ngates = jv_array_length(jv_copy(gates)), gates_true = 0;
	long restarts = 0;
	time_t last_restart = 0;	/* the latest container's last termination (0: none known) */
	const char *phase = ksim_str(o, "status.phase"), *reason = ksim_str(o, "status.reason");
	const char *node = ksim_str(o, "spec.nodeName"), *nominated = ksim_str(o, "status.nominatedNodeName");
	char status[128];
	jv cells, restarts_cell;

	snprintf(status, sizeof(status), "%s", reason ? reason : phase ? phase : "Pending");
	if (jv_get_kind(cs) == JV_KIND_ARRAY) {
		jv_array_foreach(cs, i, c) {
			jv r = jv_object_get(jv_copy(c), jv_string("ready"));
			const char *waiting = ksim_str(c, "state.waiting.reason");
			const char *done = ksim_str(c, "state.terminated.reason");

			const char *fin = ksim_str(c, "lastState.terminated.finishedAt");
			time_t t;

			ready += jv_get_kind(r) == JV_KIND_TRUE;
			restarts += key_num(c, "restartCount", 0);
			if (key_num(c, "restartCount", 0) > 0 && fin && !kop_time_parse(fin, &t) && t > last_restart)
				last_restart = t;
			if (waiting && *waiting)
				snprintf(status, sizeof(status), "%s", waiting);
			else if (done && *done)
				snprintf(status, sizeof(status), "%s", done);	/* "Completed", as kubectl prints it */
			jv_free(r);
			jv_free(c);
		}
	}
	if (ksim_str(o, "metadata.deletionTimestamp"))
		snprintf(status, sizeof(status), "Terminating");
	/* a readiness gate counts when the pod's condition of its type is True */
	jv_array_foreach(gates, i, g) {
		const char *type = ksim_str(g, "conditionType");

		jv_array_foreach(conds, j, c) {
			const char *ct = ksim_str(c, "type"), *st = ksim_str(c, "status");
			int match = type && ct && !strcmp(type, ct);

			gates_true += match && st && !strcmp(st, "True");
			jv_free(c);
			if (match)
				break;
		}
		jv_free(g);
	}
	if (last_restart) {
		/* printers.go: "2 (5m ago)", a string cell as its column says */
		char ago[32];

		human_duration((long long)(time(NULL) - last_restart), ago, sizeof(ago));
		restarts_cell = fmt("%ld (%s ago)", restarts, ago);
	} else {
		restarts_cell = fmt("%ld", restarts);
	}
	cells = JV_ARRAY(fmt("%d/%d", ready, total), jv_string(status), restarts_cell,
			 age(o, "metadata.creationTimestamp"), nonempty_or(json_path(o, ".status.podIPs[0].ip"), "<none>"),
			 jv_string(node && *node ? node : "<none>"),
			 jv_string(nominated && *nominated ? nominated : "<none>"),
			 ngates ? fmt("%d/%d", gates_true, ngates) : jv_string("<none>"));
	jv_free(gates);
	jv_free(conds);
	jv_free(cs);
	jv_free(cn);
	return cells;
}

static jv service_cells(jv o)
{
	jv ports = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("ports")));
	jv ing = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("status"), jv_string("loadBalancer"), jv_string("ingress")));
	const char *type = ksim_str(o, "spec.type");
	struct kop_buf p = KOP_BUF_INIT, ext = KOP_BUF_INIT;
	jv cells;

	if (!type)
		type = "ClusterIP";
	if (jv_get_kind(ports) == JV_KIND_ARRAY) {
		jv_array_foreach(ports, i, pt) {
			long port = key_num(pt, "port", 0), np = key_num(pt, "nodePort", 0);
			const char *proto = ksim_str(pt, "protocol");

			if (i)
				kop_buf_adds(&p, ",");
			if (np)
				kop_buf_addf(&p, "%ld:%ld/%s", port, np, proto ? proto : "TCP");
			else
				kop_buf_addf(&p, "%ld/%s", port, proto ? proto : "TCP");
			jv_free(pt);
		}
	}
	if (jv_get_kind(ing) == JV_KIND_ARRAY && jv_array_length(jv_copy(ing)) > 0) {
		jv_array_foreach(ing, i, e) {
			const char *ip = ksim_str(e, "ip"), *host = ksim_str(e, "hostname");

			if (i)
				kop_buf_adds(&ext, ",");
			kop_buf_adds(&ext, ip ? ip : host ? host : "");
			jv_free(e);
		}
	} else {
		kop_buf_adds(&ext, !strcmp(type, "LoadBalancer") ? "<pending>" : "<none>");
	}
	cells = JV_ARRAY(jv_string(type), str_or(o, "spec.clusterIP", "<none>"), jv_string(ext.buf),
			 jv_string(p.buf ? p.buf : "<none>"), age(o, "metadata.creationTimestamp"),
			 format_labels(o, JV_ARRAY(jv_string("spec"), jv_string("selector"))));
	kop_buf_release(&p);
	kop_buf_release(&ext);
	jv_free(ports);
	jv_free(ing);
	return cells;
}

/* The address of the first status.addresses entry of a type, or "<none>". */
static jv node_address(jv o, const char *type)
{
	jv as = arr_at(o, JV_ARRAY(jv_string("status"), jv_string("addresses"))), r = jv_invalid();

	jv_array_foreach(as, i, a) {
		const char *t = ksim_str(a, "type"), *addr = ksim_str(a, "address");

		if (!jv_is_valid(r) && t && !strcmp(t, type))
			r = jv_string(addr ? addr : "");
		jv_free(a);
	}
	jv_free(as);
	return jv_is_valid(r) ? r : jv_string("<none>");
}

static jv node_cells(jv o)
{
	jv conds = arr_at(o, JV_ARRAY(jv_string("status"), jv_string("conditions")));
	jv labels = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("metadata"), jv_string("labels")));
	jv roles = jv_object(), unsched = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("unschedulable")));
	const char *ready = NULL;
	struct kop_buf st = KOP_BUF_INIT;
	jv cells, rs;

	jv_array_foreach(conds, i, c) {
		const char *t = ksim_str(c, "type");

		if (t && !strcmp(t, "Ready")) {
			const char *s = ksim_str(c, "status");

			ready = s && !strcmp(s, "True") ? "Ready" : "NotReady";
		}
		jv_free(c);
	}
	kop_buf_adds(&st, ready ? ready : "Unknown");
	if (jv_get_kind(unsched) == JV_KIND_TRUE)
		kop_buf_adds(&st, ",SchedulingDisabled");
	/* node-role.kubernetes.io/ROLE labels, and kubernetes.io/role=ROLE */
	if (jv_get_kind(labels) == JV_KIND_OBJECT) {
		jv_object_foreach(labels, k, v) {
			const char *key = jv_string_value(k);

			if (!strncmp(key, "node-role.kubernetes.io/", 24) && key[24])
				roles = jv_object_set(roles, jv_string(key + 24), jv_true());
			else if (!strcmp(key, "kubernetes.io/role") && jv_get_kind(v) == JV_KIND_STRING &&
				 jv_string_length_bytes(jv_copy(v)) > 0)
				roles = jv_object_set(roles, jv_copy(v), jv_true());
			jv_free(k);
			jv_free(v);
		}
	}
	rs = joined(jv_keys(roles), ",");	/* a set: sorted, each once */
	cells = JV_ARRAY(jv_string(st.buf), nonempty_or(rs, "<none>"), age(o, "metadata.creationTimestamp"),
			 str_or(o, "status.nodeInfo.kubeletVersion", ""), node_address(o, "InternalIP"),
			 node_address(o, "ExternalIP"), nonempty_or(str_or(o, "status.nodeInfo.osImage", ""), "<unknown>"),
			 nonempty_or(str_or(o, "status.nodeInfo.kernelVersion", ""), "<unknown>"),
			 nonempty_or(str_or(o, "status.nodeInfo.containerRuntimeVersion", ""), "<unknown>"));
	kop_buf_release(&st);
	jv_free(conds);
	jv_free(labels);
	jv_free(unsched);
	return cells;
}

/* helper.GetPersistentVolumeClaimClass: the beta annotation, else spec.storageClassName. */
static jv storage_class(jv o)
{
	jv a = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
					      jv_string("volume.beta.kubernetes.io/storage-class")));

	if (jv_get_kind(a) == JV_KIND_STRING)
		return a;
	jv_free(a);
	return str_or(o, "spec.storageClassName", "");
}

static jv pvc_cells(jv o)
{
	jv modes = arr_at(o, JV_ARRAY(jv_string("status"), jv_string("accessModes")));
	const char *volume = ksim_str(o, "spec.volumeName");
	static const char *const order[][2] = { { "ReadWriteOnce", "RWO" }, { "ReadOnlyMany", "ROX" },
						{ "ReadWriteMany", "RWX" }, { "ReadWriteOncePod", "RWOP" } };
	struct kop_buf m = KOP_BUF_INIT;
	jv cells, capacity = jv_string("");

	if (volume && *volume) {
		/* helper.GetAccessModesAsString: in this order, each once */
		for (size_t i = 0; i < sizeof(order) / sizeof(*order); i++) {
			int has = 0;

			jv_array_foreach(modes, j, e) {
				has |= jv_get_kind(e) == JV_KIND_STRING && !strcmp(jv_string_value(e), order[i][0]);
				jv_free(e);
			}
			if (has)
				kop_buf_addf(&m, "%s%s", m.len ? "," : "", order[i][1]);
		}
		jv_free(capacity);
		capacity = str_or(o, "status.capacity.storage", "");
	}
	cells = JV_ARRAY(jv_string(ksim_str(o, "metadata.deletionTimestamp") ? "Terminating" :
				   jstr(o, "status.phase", "Pending")),
			 jv_string(volume ? volume : ""), capacity, jv_string(m.buf ? m.buf : ""),
			 storage_class(o), str_or(o, "spec.volumeAttributesClassName", "<unset>"),
			 age(o, "metadata.creationTimestamp"), str_or(o, "spec.volumeMode", "<unset>"));
	kop_buf_release(&m);
	jv_free(modes);
	return cells;
}

/* Role, then (wide) Users, Groups, ServiceAccounts of a RoleBinding or ClusterRoleBinding. */
static jv binding_cells(jv o)
{
	jv subjects = arr_at(o, JV_ARRAY(jv_string("subjects")));
	jv users = jv_array(), groups = jv_array(), sas = jv_array();

	jv_array_foreach(subjects, i, s) {
		const char *kind = jstr(s, "kind", ""), *name = jstr(s, "name", "");

		if (!strcmp(kind, "ServiceAccount"))
			sas = jv_array_append(sas, fmt("%s/%s", jstr(s, "namespace", ""), name));
		else if (!strcmp(kind, "User"))
			users = jv_array_append(users, jv_string(name));
		else if (!strcmp(kind, "Group"))
			groups = jv_array_append(groups, jv_string(name));
		jv_free(s);
	}
	jv_free(subjects);
	return JV_ARRAY(fmt("%s/%s", jstr(o, "roleRef.kind", ""), jstr(o, "roleRef.name", "")),
			age(o, "metadata.creationTimestamp"), joined(users, ", "), joined(groups, ", "),
			joined(sas, ", "));
}

/* A field of an Event under its core/v1 name or its events.k8s.io/v1 one. */
static jv ev_field(jv o, const char *core, const char *events)
{
	jv v = jv_object_get(jv_copy(o), jv_string(core));

	if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL)
		return v;
	jv_free(v);
	v = jv_object_get(jv_copy(o), jv_string(events));
	return jv_is_valid(v) ? v : (jv_free(v), jv_null());
}

/* translateTimestampSince of a time value (consumed): "<unknown>" when unset. */
static jv since(jv ts)
{
	jv r = cell_value(ts, "date");

	if (jv_get_kind(r) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(r)) > 0)
		return r;
	jv_free(r);
	return jv_string("<unknown>");
}

/* strings.TrimSpace of a string (consumed). */
static jv trimmed(jv s)
{
	const char *b = jv_string_value(s), *e = b + jv_string_length_bytes(jv_copy(s));
	char *t;
	jv r;

	while (b < e && *b && strchr(" \t\n\v\f\r", *b))	/* (strchr finds the NUL too) */
		b++;
	while (e > b && e[-1] && strchr(" \t\n\v\f\r", e[-1]))
		e--;
	t = kop_strndup(b, e - b);
	r = jv_string(t);
	free(t);
	jv_free(s);
	return r;
}

/*
 * The row of an Event (Name is last, not first): Last Seen, Type, Reason,
 * Object, Subobject, Source, Message, First Seen, Count, Name.
 */
static jv event_cells(jv o)
{
	jv inv = ev_field(o, "involvedObject", "regarding"), src = ev_field(o, "source", "deprecatedSource");
	jv series = jv_object_get(jv_copy(o), jv_string("series")), first, last, count, msg, target, cells;
	const char *kind = jstr(inv, "kind", ""), *name = jstr(inv, "name", "");
	const char *component = jstr(src, "component", ""), *host = jstr(src, "host", "");
	char lower[256];
	size_t i;

	first = ev_field(o, "firstTimestamp", "deprecatedFirstTimestamp");
	if (jv_get_kind(first) != JV_KIND_STRING) {
		jv_free(first);
		first = jv_object_get(jv_copy(o), jv_string("eventTime"));
	}
	first = since(first);
	last = ev_field(o, "lastTimestamp", "deprecatedLastTimestamp");
	last = jv_get_kind(last) == JV_KIND_STRING ? since(last) : (jv_free(last), jv_copy(first));
	count = ev_field(o, "count", "deprecatedCount");
	if (jv_get_kind(series) == JV_KIND_OBJECT) {
		jv_free(last);
		jv_free(count);
		last = since(jv_object_get(jv_copy(series), jv_string("lastObservedTime")));
		count = jv_object_get(jv_copy(series), jv_string("count"));
	}
	if (jv_get_kind(count) != JV_KIND_NUMBER || jv_number_value(count) == 0) {
		jv_free(count);
		count = jv_number(1);	/* singleton events have no count in the new API */
	}
	for (i = 0; kind[i] && i < sizeof(lower) - 1; i++)
		lower[i] = kind[i] >= 'A' && kind[i] <= 'Z' ? kind[i] - 'A' + 'a' : kind[i];
	lower[i] = 0;
	target = *name ? fmt("%s/%s", lower, name) : jv_string(lower);
	if (!*component)
		component = jstr(o, "reportingComponent", jstr(o, "reportingController", ""));
	if (!*host)
		host = jstr(o, "reportingInstance", "");
	msg = ev_field(o, "message", "note");
	msg = jv_get_kind(msg) == JV_KIND_STRING ? trimmed(msg) : (jv_free(msg), jv_string(""));
	/* JV_ARRAY takes 9 at most */
	cells = jv_array_append(JV_ARRAY(last, str_or(o, "type", ""), str_or(o, "reason", ""), target,
					 jv_string(jstr(inv, "fieldPath", "")),
					 *host ? fmt("%s, %s", component, host) : jv_string(component), msg, first,
					 count),
				str_or(o, "metadata.name", ""));
	jv_free(inv);
	jv_free(src);
	jv_free(series);
	return cells;
}

#define D_NAME "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: http://kubernetes.io/docs/user-guide/identifiers#names"
#define D_AGE "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
#define D_CONTAINERS "Names of each container in the template."
#define D_IMAGES "Images referenced by each container in the template."
#define D_SELECTOR "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."

/*
 * The column definitions of a built-in kind, as kube-apiserver's printers
 * (pkg/printers/internalversion) define them: the server always sends the
 * wide columns (priority 1), `kubectl get -o wide` shows them. Kinds
 * without a printer get the default table (Name, Created At).
 */
static jv builtin_columns(const struct ksim_type *t)
{
	const char *r = t->gr;
	jv name = col("Name", "string", "name", D_NAME, 0), agec = col("Age", "string", "", D_AGE, 0);

	if (!strcmp(r, "pods"))
		return JV_ARRAY(name, col("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0),
				col("Status", "string", "", "The aggregate status of the containers in this pod.", 0),
				col("Restarts", "string", "", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0),
				agec, col("IP", "string", "", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1),
				col("Node", "string", "", "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod.", 1),
				col("Nominated Node", "string", "", "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.", 1),
				col("Readiness Gates", "string", "", "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\"", 1));
	if (!strcmp(r, "deployments.apps"))
		return JV_ARRAY(name, col("Ready", "string", "", "Number of the pod with ready state", 0),
				col("Up-to-date", "string", "", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", 0),
				col("Available", "string", "", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", 0),
				agec, col("Containers", "string", "", D_CONTAINERS, 1), col("Images", "string", "", D_IMAGES, 1),
				col("Selector", "string", "", D_SELECTOR, 1));
	if (!strcmp(r, "replicasets.apps"))
		return JV_ARRAY(name, col("Desired", "integer", "", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1.", 0),
				col("Current", "integer", "", "Replicas is the most recently observed number of replicas.", 0),
				col("Ready", "integer", "", "The number of ready replicas for this replica set.", 0),
				agec, col("Containers", "string", "", D_CONTAINERS, 1), col("Images", "string", "", D_IMAGES, 1),
				col("Selector", "string", "", "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set.", 1));
	if (!strcmp(r, "statefulsets.apps"))
		return JV_ARRAY(name, col("Ready", "string", "", "Number of the pod with ready state", 0), agec,
				col("Containers", "string", "", D_CONTAINERS, 1), col("Images", "string", "", D_IMAGES, 1));
	if (!strcmp(r, "daemonsets.apps"))
		return jv_array_concat(JV_ARRAY(name, col("Desired", "integer", "", "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).", 0),
				col("Current", "integer", "", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.", 0),
				col("Ready", "integer", "", "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.", 0),
				col("Up-to-date", "integer", "", "The total number of nodes that are running updated daemon pod", 0),
				col("Available", "integer", "", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)", 0),
				col("Node Selector", "string", "", "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node.", 0)),
				JV_ARRAY(agec, col("Containers", "string", "", D_CONTAINERS, 1),
					 col("Images", "string", "", D_IMAGES, 1), col("Selector", "string", "", D_SELECTOR, 1)));
	if (!strcmp(r, "replicationcontrollers"))
		return JV_ARRAY(name, col("Desired", "integer", "", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1.", 0),
				col("Current", "integer", "", "Replicas is the most recently observed number of replicas.", 0),
				col("Ready", "integer", "", "The number of ready replicas for this replication controller.", 0),
				agec, col("Containers", "string", "", D_CONTAINERS, 1), col("Images", "string", "", D_IMAGES, 1),
				col("Selector", "string", "", "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template.", 1));
	if (!strcmp(r, "services"))
		return JV_ARRAY(name, col("Type", "string", "", "type determines how the Service is exposed.", 0),
				col("Cluster-IP", "string", "", "clusterIP is the IP address of the service and is usually assigned randomly.", 0),
				col("External-IP", "string", "", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.", 0),
				col("Port(s)", "string", "", "The list of ports that are exposed by this service.", 0), agec,
				col("Selector", "string", "", "Route service traffic to pods with label keys and values matching this selector.", 1));
	if (!strcmp(r, "nodes"))
		return jv_array_append(JV_ARRAY(name, col("Status", "string", "", "The status of the node", 0),
				col("Roles", "string", "", "The roles of the node", 0), agec,
				col("Version", "string", "", "Kubelet Version reported by the node.", 0),
				col("Internal-IP", "string", "", "List of addresses reachable to the node.", 1),
				col("External-IP", "string", "", "List of addresses reachable to the node.", 1),
				col("OS-Image", "string", "", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
				col("Kernel-Version", "string", "", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1)),
				col("Container-Runtime", "string", "", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1));
	if (!strcmp(r, "namespaces"))
		return JV_ARRAY(name, col("Status", "string", "", "The status of the namespace", 0), agec);
	if (!strcmp(r, "configmaps"))
		return JV_ARRAY(name, col("Data", "string", "", "Data contains the configuration data.", 0), agec);
	if (!strcmp(r, "secrets"))
		return JV_ARRAY(name, col("Type", "string", "", "Used to facilitate programmatic handling of secret data.", 0),
				col("Data", "string", "", "Data contains the secret data.", 0), agec);
	if (!strcmp(r, "serviceaccounts"))
		return JV_ARRAY(name, col("Secrets", "string", "", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.", 0), agec);
	if (!strcmp(r, "persistentvolumeclaims"))
		return JV_ARRAY(name, col("Status", "string", "", "phase represents the current phase of PersistentVolumeClaim.", 0),
				col("Volume", "string", "", "volumeName is the binding reference to the PersistentVolume backing this claim.", 0),
				col("Capacity", "string", "", "capacity represents the actual resources of the underlying volume.", 0),
				col("Access Modes", "string", "", "accessModes contains the actual access modes the volume backing the PVC has.", 0),
				col("StorageClass", "string", "", "StorageClass of the pvc", 0),
				col("VolumeAttributesClass", "string", "", "VolumeAttributesClass of the pvc", 0), agec,
				col("VolumeMode", "string", "", "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.", 1));
	if (!strcmp(r, "leases.coordination.k8s.io"))
		return JV_ARRAY(name, col("Holder", "string", "", "holderIdentity contains the identity of the holder of a current lease.", 0), agec);
	if (!strcmp(r, "networkpolicies.networking.k8s.io"))
		return JV_ARRAY(name, col("Pod-Selector", "string", "", "Selects the pods to which this NetworkPolicy object applies.", 0), agec);
	if (!strcmp(r, "rolebindings.rbac.authorization.k8s.io") ||
	    !strcmp(r, "clusterrolebindings.rbac.authorization.k8s.io")) {
		const char *what = *r == 'r' ? "roleBinding" : "clusterRoleBinding";

		return JV_ARRAY(name, col("Role", "string", "", "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.", 0),
				agec, jv_object_set(col("Users", "string", "", "", 1), jv_string("description"), fmt("Users in the %s", what)),
				jv_object_set(col("Groups", "string", "", "", 1), jv_string("description"), fmt("Groups in the %s", what)),
				jv_object_set(col("ServiceAccounts", "string", "", "", 1), jv_string("description"),
					      fmt("ServiceAccounts in the %s", what)));
	}
	if (!strcmp(r, "events")) {
		jv_free(agec);	/* Name is last, at priority 1 */
		return jv_array_append(JV_ARRAY(col("Last Seen", "string", "", "The time at which the most recent occurrence of this event was recorded.", 0),
				col("Type", "string", "", "Type of this event (Normal, Warning), new types could be added in the future", 0),
				col("Reason", "string", "", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0),
				col("Object", "string", "", "The object that this event is about.", 0),
				col("Subobject", "string", "", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].", 1),
				col("Source", "string", "", "The component reporting this event. Should be a short machine understandable string.", 1),
				col("Message", "string", "", "A human-readable description of the status of this operation.", 0),
				col("First Seen", "string", "", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1),
				col("Count", "string", "", "The number of times this event has occurred.", 1)),
				jv_object_set(name, jv_string("priority"), jv_number(1)));
	}
	jv_free(agec);
	return JV_ARRAY(name, col("Created At", "date", "", D_AGE, 0));	/* rest's default table */
}

/* The cells of a row of a built-in kind, for builtin_columns(t). */
static jv builtin_cells(const struct ksim_type *t, jv o)
{
	const char *r = t->gr;
	jv name, agec, rest;

	if (!strcmp(r, "events"))
		return event_cells(o);
	name = str_or(o, "metadata.name", "");
	agec = age(o, "metadata.creationTimestamp");
	if (!strcmp(r, "pods")) {
		jv_free(agec);	/* pod_cells has it */
		rest = pod_cells(o);
	} else if (!strcmp(r, "deployments.apps")) {
		rest = workload_cells(JV_ARRAY(fmt("%ld/%ld", num(o, "status", "readyReplicas", NULL, 0),
						    num(o, "spec", "replicas", NULL, 1)),
					       jv_number(num(o, "status", "updatedReplicas", NULL, 0)),
					       jv_number(num(o, "status", "availableReplicas", NULL, 0)), agec),
				      o, 1);
	} else if (!strcmp(r, "replicasets.apps")) {
		rest = workload_cells(JV_ARRAY(jv_number(num(o, "spec", "replicas", NULL, 1)),
					       jv_number(num(o, "status", "replicas", NULL, 0)),
					       jv_number(num(o, "status", "readyReplicas", NULL, 0)), agec),
				      o, 1);
	} else if (!strcmp(r, "statefulsets.apps")) {
		rest = workload_cells(JV_ARRAY(fmt("%ld/%ld", num(o, "status", "readyReplicas", NULL, 0),
						    num(o, "spec", "replicas", NULL, 1)), agec),
				      o, 0);
	} else if (!strcmp(r, "daemonsets.apps")) {
		jv ns = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("template"), jv_string("spec"),
							 jv_string("nodeSelector")));
		jv ls = JV_OBJECT(jv_string("matchLabels"), jv_copy(ns));
		jv nsel = jv_get_kind(ns) == JV_KIND_OBJECT && jv_object_length(jv_copy(ns)) ? ksim_selector_string(ls) :
											      jv_string("<none>");

		jv_free(ls);
		jv_free(ns);
		rest = workload_cells(JV_ARRAY(jv_number(num(o, "status", "desiredNumberScheduled", NULL, 0)),
					       jv_number(num(o, "status", "currentNumberScheduled", NULL, 0)),
					       jv_number(num(o, "status", "numberReady", NULL, 0)),
					       jv_number(num(o, "status", "updatedNumberScheduled", NULL, 0)),
					       jv_number(num(o, "status", "numberAvailable", NULL, 0)),
					       jv_is_valid(nsel) ? nsel : (jv_free(nsel), jv_string("<none>")), agec),
				      o, 1);
	} else if (!strcmp(r, "replicationcontrollers")) {
		jv sel = JV_OBJECT(jv_string("matchLabels"),
				   jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("selector"))));
		jv s = ksim_selector_string(sel);	/* a ReplicationController's selector is a map */
		jv names, images;

		jv_free(sel);
		container_cells(o, &names, &images);
		rest = JV_ARRAY(jv_number(num(o, "spec", "replicas", NULL, 1)), jv_number(num(o, "status", "replicas", NULL, 0)),
				jv_number(num(o, "status", "readyReplicas", NULL, 0)), agec, names, images,
				jv_is_valid(s) ? s : (jv_free(s), jv_string("<invalid>")));
	} else if (!strcmp(r, "services")) {
		jv_free(agec);
		rest = service_cells(o);
	} else if (!strcmp(r, "nodes")) {
		jv_free(agec);
		rest = node_cells(o);
	} else if (!strcmp(r, "namespaces")) {
		rest = JV_ARRAY(str_or(o, "status.phase", "Active"), agec);
	} else if (!strcmp(r, "configmaps")) {
		rest = JV_ARRAY(jv_number(obj_len(o, "data") + obj_len(o, "binaryData")), agec);
	} else if (!strcmp(r, "secrets")) {
		rest = JV_ARRAY(str_or(o, "type", "Opaque"), jv_number(obj_len(o, "data")), agec);
	} else if (!strcmp(r, "serviceaccounts")) {
		jv s = arr_at(o, JV_ARRAY(jv_string("secrets")));

		rest = JV_ARRAY(jv_number(jv_array_length(s)), agec);
	} else if (!strcmp(r, "persistentvolumeclaims")) {
		jv_free(agec);
		rest = pvc_cells(o);
	} else if (!strcmp(r, "leases.coordination.k8s.io")) {
		rest = JV_ARRAY(str_or(o, "spec.holderIdentity", ""), agec);
	} else if (!strcmp(r, "networkpolicies.networking.k8s.io")) {
		jv sel = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("podSelector")));
		jv s = ksim_selector_string(sel);

		jv_free(sel);
		/* metav1.FormatLabelSelector */
		rest = JV_ARRAY(jv_is_valid(s) ? nonempty_or(s, "<none>") : (jv_free(s), jv_string("<error>")), agec);
	} else if (!strcmp(r, "rolebindings.rbac.authorization.k8s.io") ||
		   !strcmp(r, "clusterrolebindings.rbac.authorization.k8s.io")) {
		jv_free(agec);
		rest = binding_cells(o);
	} else {
		jv_free(agec);
		rest = JV_ARRAY(str_or(o, "metadata.creationTimestamp", ""));
	}
	return jv_array_concat(JV_ARRAY(name), rest);
}

jv ksim_table(const struct ksim_type *t, jv items, const char *rv, const char *cont, int include_object)
{
	jv defs, rows = jv_array(), md, columns = jv_null();

	if (t->crd) {
		/* apiextensions: additionalPrinterColumns, or Age when there are none (serveDefaultColumnsIfEmpty) */
		columns = jv_get_kind(t->columns) == JV_KIND_ARRAY && jv_array_length(jv_copy(t->columns)) > 0 ?
			jv_copy(t->columns) :
			JV_ARRAY(JV_OBJECT(jv_string("name"), jv_string("Age"), jv_string("type"), jv_string("date"),
					   jv_string("description"), jv_string(D_AGE), jv_string("jsonPath"),
					   jv_string(".metadata.creationTimestamp")));
		defs = JV_ARRAY(col("Name", "string", "name", D_NAME, 0));
		jv_array_foreach(columns, i, c) {
			const char *type = ksim_str(c, "type");
			const char *format = ksim_str(c, "format");
			const char *desc = ksim_str(c, "description");
			jv d = col(jstr(c, "name", ""), type ? type : "string", format ? format : "", "",
				   (int)key_num(c, "priority", 0));

			d = jv_object_set(d, jv_string("description"),
					  desc && *desc ? jv_string(desc) :
					  fmt("Custom resource definition column (in JSONPath format): %s",
					      jstr(c, "jsonPath", "")));
			defs = jv_array_append(defs, d);
			jv_free(c);
		}
	} else {
		defs = builtin_columns(t);
	}
	jv_array_foreach(items, i, o) {
		jv cells, row;

		if (t->crd) {
			cells = JV_ARRAY(str_or(o, "metadata.name", ""));
			jv_array_foreach(columns, j, c) {
				const char *type = ksim_str(c, "type");

				cells = jv_array_append(cells, cell_value(json_path(o, jstr(c, "jsonPath", "")),
									   type ? type : "string"));
				jv_free(c);
			}
		} else {
			cells = builtin_cells(t, o);
		}
		row = JV_OBJECT(jv_string("cells"), cells);
		if (include_object == 2) {
			row = jv_object_set(row, jv_string("object"), o);
		} else if (include_object == 1) {
			jv m = jv_object_get(o, jv_string("metadata"));

			row = jv_object_set(row, jv_string("object"),
					    JV_OBJECT(jv_string("kind"), jv_string("PartialObjectMetadata"),
						      jv_string("apiVersion"), jv_string("meta.k8s.io/v1"),
						      jv_string("metadata"), m));
		} else {
			jv_free(o);
		}
		rows = jv_array_append(rows, row);
	}
	jv_free(columns);
	jv_free(items);
	md = JV_OBJECT(jv_string("resourceVersion"), jv_string(rv ? rv : ""));
	if (cont && *cont)
		md = jv_object_set(md, jv_string("continue"), jv_string(cont));
	return JV_OBJECT(jv_string("kind"), jv_string("Table"), jv_string("apiVersion"), jv_string("meta.k8s.io/v1"),
			 jv_string("metadata"), md, jv_string("columnDefinitions"), defs, jv_string("rows"), rows);
}
