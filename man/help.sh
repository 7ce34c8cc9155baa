#!/bin/sh
# What help2man reads as a tool's help (make man): `TOOL --help`, the words
# unchanged, only put in the forms help2man's parser knows: "usage:" as
# "Usage:", a second synopsis line as "or:", a wrapped one joined,
# "environment:" and "options:" capitalised, an "Options:" heading before
# the first option, and the exit codes under a section of their own. A tool
# that fails prints nothing here, so that help2man fails too, naming it.
#
#   sh man/help.sh TOOL --help
tool=$1
text=$("$tool" "$2") || exit 1
test -n "$text" || exit 1
printf '%s\n' "$text" | awk -v name="${tool##*/}" '
function flush() { if (syn != "") print syn; syn = "" }
NR == 1 && /^usage: / { syn = "Usage: " substr($0, 8); inusage = 1; next }
inusage && /^ +\[/ { sub(/^ +/, ""); syn = syn " " $0; next }
inusage && index($0, " " name " ") && /^ +[^ -]/ { flush(); sub(/^ +/, ""); syn = "   or: " $0; next }
inusage { flush(); inusage = 0 }
/^environment:$/ { print "Environment:"; next }
/^options:$/ { print "Options:"; opts = 1; next }
!opts && /^ +-/ && prev == "" { print "Options:"; opts = 1 }
/^([Ee]xit|[Ee]xit codes): / { if (prev != "") print ""; print "*Exit status*" }
{ print; prev = $0 }
END { flush() }'
