# Drops what a server generates (uids, versions, times, tokens) so that
# ksim's answers compare with the recordings of a real kube-apiserver.
def scrub:
  walk(if type == "object" then
         del(.uid, .resourceVersion, .creationTimestamp, .time, .continue, .storageVersionHash, .singularName)
       else . end);
scrub
