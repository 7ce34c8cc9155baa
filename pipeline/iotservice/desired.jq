# desired.jq: the desired children of one IoTService, from the part of the
# input they depend on (ireconcile's render program, docs/writing-programs.md):
# {parent (without status), related, settings} ->
#   {invalid: null or {field, value, message, more (the other invalid
#   fields, when there are several)}, desired: [objects]}
# render.jq runs it (ireconcile keeps its answer until that part changes,
# and gives it to sync.jq as .rendered).

include "kop";
include "spec";
include "specgen";
include "config";
include "children";
include "rbac";

# Every problem of the parent's spec and name, in a stable order (the name,
# then the fields in the schema's order as they decode, then what
# iot_validate_all checks), and the spec (decoded, defaulted: a bad field as
# if absent): {spec, errors: [{field, value, message}, ...]}. A field that
# cannot be decoded is reported once, not again by the checks.
def iot_spec_problems($x; $ns):
  [if ($ns | kop_dns1123_label) | not then
     {field: "metadata.name", value: $x,
      message: "gives the instance namespace '\($ns)', which is not a valid namespace name (at most 63 lowercase letters, digits and '-')"}
   # (kube-controller-manager labels a StatefulSet's pods controller-revision-hash:
   # NAME-HASH, 10 characters of hash, and a label value has at most 63:
   # kubernetes/kubernetes#64023; the longest child name is this one)
   elif ("gateway-mqtt-\($x)" | length) > 52 then
     {field: "metadata.name", value: $x,
      message: "gives the StatefulSet name 'gateway-mqtt-\($x)', longer than 52 characters (its pods could not be created: their controller-revision-hash label would exceed 63)"}
   else empty end] as $named
  # (the straight-line decoder first: it stops at the first bad field, and
  # the walk that reports them all runs only then)
  | . as $given
  | (try {spec: iot_spec_fast, e: []}
     catch (if type == "object" and has("field") then
              . as $first
              # (the two decoders agree, t2106; were they not to, the first error still counts)
              | $given | iot_decode_collect(iot_spec_schema; [])
              | {spec: (.v | iot_spec_defaults), e: (if .e == [] then [$first] else .e end)}
            else error(.) end)) as $d
  | $d.spec as $spec
  | [$d.e[].field] as $undecoded
  | [$spec | iot_validate_all([iot_components($spec)[] | .path])
     | .field as $f
     | select(all($undecoded[]; ($f == . or ($f | startswith(. + ".")) or ($f | startswith(. + "["))) | not))] as $checked
  | {spec: $spec, errors: ($named + $d.e + $checked)};

# ---- what a real server stores: the size of the rendered objects ----
#
# kube-apiserver refuses a Secret (or ConfigMap) whose data, each key's length
# plus its value's (decoded) length, sums to more than 1 MiB, and etcd any
# object whose request exceeds 1.5 MiB (its default --max-request-bytes). An
# instance that would meet either is Failed before anything is applied.
# Lengths are of UTF-8 bytes. What the directives make (lib/render.c) is not
# known here: its size is bounded from below, so that nothing a server would
# store is refused (a YAML text holds every key and scalar of its value at
# least once; base64 of n bytes is 4*ceil(n/3); md5 and sha256 hex are 32 and
# 64). What passes the bound and is still too large, the server refuses
# (the apply's error makes the instance Failed).
def iot_secret_max_bytes: 1048576;
def iot_object_max_bytes: 1572864;

# The bytes of text a value holds at least: its strings; with $yaml (the value
# written as YAML) its keys, numbers and booleans too; a directive as what it
# makes.
def _iot_bytes_lb($yaml):
  if type == "string" then utf8bytelength
  elif type == "object" then
    if kop_is_fn then
      .["$fn"] as $f
      | if $f == "md5" then 32 elif $f == "sha256" then 64
        elif $f == "base64" then .arg | _iot_bytes_lb(false) | ((. + 2) / 3 | floor) * 4
        elif $f == "yaml" then .arg | _iot_bytes_lb(true)
        else 0 end
    elif $yaml then reduce keys_unsorted[] as $k (0; . + ($k | utf8bytelength)) + ([.[] | _iot_bytes_lb(true)] | add // 0)
    else [.[] | _iot_bytes_lb(false)] | add // 0 end
  elif type == "array" then [.[] | _iot_bytes_lb($yaml)] | add // 0
  elif $yaml and (type == "number" or type == "boolean") then tostring | length
  else 0 end;
def _iot_text_bytes_lb: _iot_bytes_lb(false);
# The decoded length of a Secret's data value: base64 text, or a directive
# that makes it (base64 of a value: that value's bytes).
def _iot_data_bytes_lb:
  if type == "string" then
    ((length / 4 | floor) * 3) - (if endswith("==") then 2 elif endswith("=") then 1 else 0 end)
  elif kop_is_fn and .["$fn"] == "base64" then .arg | _iot_text_bytes_lb
  else _iot_text_bytes_lb end;
def _iot_data_size:
  reduce ((.data // {}) | to_entries[]) as $e (0; . + ($e.key | utf8bytelength) + ($e.value | _iot_data_bytes_lb))
  + reduce ((.binaryData // {}) | to_entries[]) as $e (0; . + ($e.key | utf8bytelength) + ($e.value | _iot_data_bytes_lb))
  + reduce ((.stringData // {}) | to_entries[]) as $e (0; . + ($e.key | utf8bytelength) + ($e.value | _iot_text_bytes_lb));

# The text of a spec below which its objects are not measured: they hold
# each field of the spec (a few times at most: config.yml once, a Deployment
# its image and ports) and less than 64 KiB of their own (names, labels, keys),
# so that a spec with less than 256 KiB of text renders none over 1 MiB. (The
# walks cost half as much again as the render; the spec's strings, a
# twentieth.)
def iot_size_checked_from: 262144;
def iot_spec_text_bytes: [.. | strings | utf8bytelength] | add // 0;

# The desired objects a server would refuse for their size, each as a problem
# of the spec {field: "spec", message} naming the object, its size and the
# limit, and the longest text of $given (the spec as written) as a hint.
def iot_size_problems($given):
  [.[] | . as $o
   | "\(.kind) \(if .metadata.namespace then "\(.metadata.namespace)/" else "" end)\(.metadata.name)" as $what
   | if .kind == "Secret" or .kind == "ConfigMap" then
       _iot_data_size as $n
       | select($n > iot_secret_max_bytes)
       | {what: $what, n: $n, max: iot_secret_max_bytes, of: "bytes of data", may: "bytes (1 MiB) a \(.kind) may hold"}
     else
       _iot_text_bytes_lb as $n
       | select($n > iot_object_max_bytes)
       | {what: $what, n: $n, max: iot_object_max_bytes, of: "bytes of text", may: "bytes (1.5 MiB) an object may take in etcd"}
     end] as $big
  | if $big == [] then []
    else
      ([$given | paths(type == "string") as $p | {p: $p, n: (getpath($p) | utf8bytelength)}] | max_by(.n)) as $longest
      | [$big[] | {field: "spec",
                   message: "renders the \(.what) with at least \(.n) \(.of), more than the \(.max) \(.may)\(if $longest != null then "; its longest field is \(iot_field($longest.p)) (\($longest.n) bytes)" else "" end)"}]
    end;

def iot_render:
  . as $in
  | $in.settings.operatorName as $o
  | $in.parent.metadata.name as $x
  | "\($o)-\($x)" as $ns
  | ($in.parent.spec | iot_spec_problems($x; $ns)) as $checked
  | (if $checked.errors == [] then
       $checked.spec as $spec
       | iot_config($spec; $x; $ns) as $config
       | {o: $o, x: $x, uid: $in.parent.metadata.uid, ns: $ns, spec: $spec, config: $config,
          pullSecret: (($in.related["Secret.v1"] // {})["\($o)/image-pull-secret"])} as $ctx
       | iot_children($ctx)
       # (the namespace, then the RoleBinding that grants the rights to write the rest there)
       | .[:1] + [iot_instance_binding($ctx; $in.settings.serviceAccountName // "iot-operator")] + .[1:]
     else [] end) as $desired
  # (nothing is applied of an instance a server would not store whole)
  | ($checked.errors
     + (if $checked.errors == [] and ($in.parent.spec | iot_spec_text_bytes) >= iot_size_checked_from then
          $desired | iot_size_problems($in.parent.spec)
        else [] end)) as $errors
  | {invalid: iot_invalid_of($errors), desired: (if $errors == [] then $desired else [] end)};
