# tests/campaign/csvcheck.awk: is a trace file well-formed CSV?
#
# Usage: awk -f csvcheck.awk FILE   (prints nothing and exits 0 when it is, else one line saying
# why and exits 1). A well-formed trace: a header, then records with exactly the header's
# number of fields, and the file's last byte is '\n' (no partial last line). Fields may be
# quoted the RFC 4180 way ("a,b", "say ""x""", a quoted newline), although stalenet's writers
# avoid the need today (docs/traces.md); a record then spans several lines.
# The last-byte check is left to the caller (awk cannot see a missing final newline).
# Written for POSIX awk (mawk): fields are counted character by character.

function count_fields(s,    i, c, n) {
	n = 1
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (inq) {
			if (c == "\"") {
				if (substr(s, i + 1, 1) == "\"")
					i++
				else
					inq = 0
			}
		} else if (c == "\"") {
			inq = 1
		} else if (c == ",") {
			n++
		}
	}
	return n
}

BEGIN { inq = 0; want = 0; bad = 0; rec = 0 }

{
	if (!inq) {
		rec++
		start = FNR
		fields = count_fields($0)
	} else {
		# A quoted field continues: the newline belongs to it, the fields go on counting.
		fields += count_fields($0) - 1
	}
	if (inq)
		next
	if (rec == 1) {
		want = fields
		if ($0 == "") {
			printf "%s:%d: empty header\n", FILENAME, start
			bad = 1
			exit 1
		}
		next
	}
	if (fields != want) {
		printf "%s:%d: %d fields, the header has %d\n", FILENAME, start, fields, want
		bad = 1
		exit 1
	}
}

END {
	if (bad)
		exit 1
	if (inq) {
		printf "%s:%d: a quoted field never closes\n", FILENAME, start
		exit 1
	}
	if (rec == 0) {
		printf "%s: empty (no header)\n", FILENAME
		exit 1
	}
}
