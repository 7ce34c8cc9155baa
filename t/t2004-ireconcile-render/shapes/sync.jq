# Holding: every observed child given back as it came (kept as it is).
# Plain: the rendered children as sync saw them (applied whole). Otherwise
# the first so and the second with one more key (merged into the whole one).
{children: (if .rendered.hold then [.children["ConfigMap.v1"][]]
            elif .rendered.plain then .rendered.desired
            else [.rendered.desired[0], (.rendered.desired[1] | .data.extra = "x")] end),
 status: {sawSpec: (.parent | has("spec")), seen: [.rendered.desired[].data | keys],
          observed: [.children["ConfigMap.v1"][] | .data | keys]}}
