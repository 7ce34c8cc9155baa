# desired.jq: the desired children of one IoTService, from the part of the
# input they depend on (ireconcile's render program, docs/writing-programs.md):
# {parent (without status), related, settings} ->
#   {invalid: null or {field, value, message, more (the other invalid
#   fields, when there are several)}, desired: [objects]}
# render.jq runs it (ireconcile keeps its answer until that part changes);
# sync.jq computes it itself when its input has no .rendered (jq's CLI).

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
              $given | iot_decode_collect(iot_spec_schema; []) | {spec: (.v | iot_spec_defaults), e}
            else error(.) end)) as $d
  | $d.spec as $spec
  | [$d.e[].field] as $undecoded
  | [$spec | iot_validate_all([iot_components($spec)[] | .path])
     | .field as $f
     | select(all($undecoded[]; ($f == . or ($f | startswith(. + ".")) or ($f | startswith(. + "["))) | not))] as $checked
  | {spec: $spec, errors: ($named + $d.e + $checked)};

def iot_render:
  . as $in
  | $in.settings.operatorName as $o
  | $in.parent.metadata.name as $x
  | "\($o)-\($x)" as $ns
  | ($in.parent.spec | iot_spec_problems($x; $ns)) as $checked
  | iot_invalid_of($checked.errors) as $invalid
  | {invalid: $invalid,
     desired: (if $invalid == null then
                 $checked.spec as $spec
                 | iot_config($spec; $x; $ns) as $config
                 | {o: $o, x: $x, uid: $in.parent.metadata.uid, ns: $ns, spec: $spec, config: $config,
                    pullSecret: (($in.related["Secret.v1"] // {})["\($o)/image-pull-secret"])} as $ctx
                 | iot_children($ctx)
                 # (the namespace, then the RoleBinding that grants the rights to write the rest there)
                 | .[:1] + [iot_instance_binding($ctx; $in.settings.serviceAccountName // "iot-operator")] + .[1:]
               else [] end)};
