# A module beside the program: found through the library path.
def widget_ns($team): "\($team)-\(.metadata.name)";
def running_pods: [.children["Pod.v1"][] | select(.status.phase == "Running") | .metadata.name] | sort;
