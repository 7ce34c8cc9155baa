# desired.jq: the desired children of one IoTService, from the part of the
# input they depend on (ireconcile's render program, docs/writing-programs.md):
# {parent (without status), related, settings} ->
#   {invalid: null or {field, value, message}, desired: [objects]}
# render.jq runs it (ireconcile keeps its answer until that part changes);
# sync.jq computes it itself when its input has no .rendered (jq's CLI).

include "kop";
include "spec";
include "specgen";
include "config";
include "children";
include "rbac";

def iot_render:
  . as $in
  | $in.settings.operatorName as $o
  | $in.parent.metadata.name as $x
  | "\($o)-\($x)" as $ns
  | (try (
       if ($ns | kop_dns1123_label) | not then
         error({field: "metadata.name", value: $x,
                message: "gives the instance namespace '\($ns)', which is not a valid namespace name (at most 63 lowercase letters, digits and '-')"})
       # (kube-controller-manager labels a StatefulSet's pods controller-revision-hash:
       # NAME-HASH, 10 characters of hash, and a label value has at most 63:
       # kubernetes/kubernetes#64023; the longest child name is this one)
       elif ("gateway-mqtt-\($x)" | length) > 52 then
         error({field: "metadata.name", value: $x,
                message: "gives the StatefulSet name 'gateway-mqtt-\($x)', longer than 52 characters (its pods could not be created: their controller-revision-hash label would exceed 63)"})
       else . end
       | ($in.parent.spec | iot_spec_fast) as $spec
       | ($spec | iot_validate([iot_components($spec)[] | .path])) , {spec: $spec}
     ) catch (if type == "object" and has("field") then {invalid: .} else error(.) end)) as $checked
  | ($checked.invalid // null) as $invalid
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
