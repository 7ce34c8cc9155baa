# Canonical form for comparing Kubernetes JSON: drops what the server
# generates (uids, times, resourceVersions, managedFields) so that golden
# files hold only what a test means.
def scrub:
  walk(if type == "object" then
         del(.uid, .resourceVersion, .creationTimestamp, .managedFields,
             .deletionTimestamp, .lastTransitionTime, .lastUpdateTime,
             .lastHeartbeatTime, .firstTimestamp, .lastTimestamp, .eventTime)
       else . end);
scrub
