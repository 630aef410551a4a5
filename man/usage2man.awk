# usage2man.awk — turns histeq_dist's --help text (app/options.c, printed by man/print_usage) into
# the man page histeq_dist.1, so that the two never disagree. Usage:
#   build/man/print_usage | awk -v version=0.1.0 -f man/usage2man.awk > build/histeq_dist.1
# The text's shape: "Usage:" lines, a description paragraph, then headings ("Resources:") over
# option lines ("  -i, --input IN        what it does", descriptions from column 25, continued on
# lines indented 24 spaces), and a closing "Exit status:" paragraph.

# Escapes text for roff: backslashes, and a leading dot or quote that would read as a request.
function esc(s) {
    gsub(/\\/, "\\e", s)
    sub(/^[.']/, "\\\\\\&&", s)
    return s
}
# Option names: hyphens as \- (the real minus sign, so the page can be copied from).
function opt(s) {
    s = esc(s)
    gsub(/-/, "\\-", s)
    return s
}
function flush_para() {
    if (para != "") { print esc(para); para = "" }
}
BEGIN { state = "start" }
/^Usage: / {
    print ".TH HISTEQ_DIST 1 \"\" \"histeq_dist " version "\" \"User Commands\""
    synopsis = substr($0, 8)
    state = "usage"
    next
}
state == "usage" && /^ +[^ ]/ {
    line = $0; sub(/^ +/, "", line)
    synopsis = synopsis "\n" line
    next
}
state == "usage" && /^$/ {
    # The synopsis is printed with the name line, once the description's first sentence is known.
    state = "desc"
    next
}
state == "desc" && /^$/ {
    flush_para()
    state = "options"
    print ".SH OPTIONS"
    next
}
state == "desc" {
    if (!named) {
        name = $0; sub(/\.$/, "", name)
        print ".SH NAME"
        print "histeq_dist \\- " esc(tolower(substr(name, 1, 1)) substr(name, 2))
        print ".SH SYNOPSIS"
        n = split(synopsis, syn, "\n")
        for (k = 1; k <= n; k++) print (k > 1 ? ".br\n" : "") opt(syn[k])
        print ".SH DESCRIPTION"
        named = 1
    }
    para = para (para == "" ? "" : "\n") $0
    next
}
state == "options" && /^Exit status:/ {
    print ".SH \"EXIT STATUS\""
    line = $0; sub(/^Exit status: */, "", line)
    para = line
    state = "exit"
    next
}
state == "options" && /^[^ ].*:$/ {
    heading = $0; sub(/:$/, "", heading)
    print ".SS \"" esc(heading) "\""
    next
}
state == "options" && /^ +-/ {
    if (substr($0, 24, 1) == " " && length($0) > 24) {
        o = substr($0, 1, 24); d = substr($0, 25)
    } else {
        o = $0; d = ""
        if (match($0, /[^ ]  +[^ ]/)) { o = substr($0, 1, RSTART); d = substr($0, RSTART + RLENGTH - 1) }
    }
    sub(/^ +/, "", o); sub(/ +$/, "", o); sub(/^ +/, "", d)
    print ".TP"
    print ".B " opt(o)
    if (d != "") print esc(d)
    next
}
state == "options" && /^ +[^ -]/ {
    line = $0; sub(/^ +/, "", line)
    print esc(line)
    next
}
state == "options" && /^$/ {
    print ".PP"
    next
}
state == "exit" {
    if ($0 != "") para = para "\n" $0
    next
}
END {
    flush_para()
    print ".SH \"SEE ALSO\""
    print "The README.md of the source tree: inputs and outputs, the rule, provenance, SLURM scripts"
    print "(installed in share/histeq_dist/)."
}
