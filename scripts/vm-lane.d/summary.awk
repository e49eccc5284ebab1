# summary.awk - scripts/vm-lane's reading of the guest's serial console (console.log).
#
#   awk -v nyn=kernel/not-yet-native -v mode=test|debug -v status=FILE -f summary.awk console.log
#
# Reads what scripts/vm-lane.d/init prints: "KLANE: section NAME" starts the output of one
# program; libtest's "test NAME ... ok|FAILED|ignored" lines inside the conformance sections
# (conformance, and conformance:natdiff, the differential test run alone) and fuzz sections are tests (a fuzz shard's named fuzz::NAME[FIRST-END]); "KLANE: done c_example::NAME exit=RC"
# is the test c_example::NAME; the TAP lines "ok|not ok N NAME [# SKIP reason]" of a kselftest
# program (section kselftest:PROG) are the tests kselftest::PROG::NAME. Kernel lines ("[   12.345678] ...", on the console and in the
# dmesg section) are checked for warnings, oopses and the debug options' reports.
#
# Prints, for every failed test, "not yet native: NAME (REASON)" when its name contains a
# pattern of kernel/not-yet-native, else "failed: NAME"; "listed as not yet native but passed:
# NAME" for the others that match; the kernel-log lines found; then exactly one line
#   native: N passed, M failed, K not yet native
# and writes shell assignments (failed=, finished=, backend=, ...) to the file `status`.

function trim(s) {
	sub(/^[ \t]+/, "", s)
	sub(/[ \t]+$/, "", s)
	return s
}

function record(name, result) {
	if (!(name in results))
		order[++count] = name
	results[name] = result
}

function listed(name,    i) {
	for (i = 1; i <= npat; i++)
		if (index(name, pat[i]) > 0)
			return i
	return 0
}

# A shell word: single-quoted.
function sq(s) {
	gsub(/'/, "'\\''", s)
	return "'" s "'"
}

BEGIN {
	npat = 0
	if (nyn != "") {
		while ((getline line < nyn) > 0) {
			sub(/\r$/, "", line)
			if (line ~ /^[ \t]*(#|$)/)
				continue
			line = trim(line)
			p = line
			sub(/[ \t].*$/, "", p)
			r = substr(line, length(p) + 1)
			pat[++npat] = p
			why[npat] = trim(r)
		}
		close(nyn)
	}
	# What the kernel log must not contain (checked on kernel lines only, so that test output
	# that merely mentions a word cannot trip it).
	bad = "WARNING:|BUG:|Oops|KASAN|lockdep|possible recursive locking|possible circular locking|" \
	      "list_add corruption|list_del corruption|UBSAN|kmemleak|hung_task|blocked for more than|" \
	      "Kernel panic|general protection fault|INFO: task"
	# Boot messages of the debug options themselves, which are not reports.
	benign = "KernelAddressSanitizer initialized|RCU lockdep checking is enabled|" \
	         "kmemleak: Kernel memory leak detector initialized|kmemleak: Automatic memory scanning thread"
	section = ""
	pending = ""
	backend = ""
	finished = 0
	nprogs = 0
	have_fuzz = 0
	have_kselftest = 0
	nklog = 0
}

# A kernel message can land in the middle of a program's line (the console is shared):
# "test NAME ... [  322.201371] hrtimer: interrupt took 39486896 ns", then "ok" on a line of
# its own. The message is checked, cut off, and the test's result taken from the next line.
{
	sub(/\r$/, "")
	if (match($0, /\[ *[0-9]+\.[0-9]+\] /)) {
		kline = substr($0, RSTART)
		if (kline ~ bad && kline !~ benign) {
			k = kline
			sub(/^\[ *[0-9]+\.[0-9]+\] */, "", k)
			if (!(k in klog_seen)) {
				klog_seen[k] = 1
				klog[++nklog] = kline
			}
		}
		if (RSTART > 1)
			$0 = substr($0, 1, RSTART - 1)
		else
			next
	}
}

pending != "" && /^(ok|FAILED|ignored)/ {
	result = $1
	sub(/,.*/, "", result)
	record(pending, result)
	pending = ""
	next
}

/^KLANE: section / { section = $3; next }
/^KLANE: backend: / { backend = substr($0, length("KLANE: backend: ") + 1); next }
/^KLANE: EXIT=/ { finished = 1; next }
/^KLANE: done / {
	name = $3
	rc = $4
	sub(/^exit=/, "", rc)
	if (name ~ /^c_example::/)
		record(name, rc == 0 ? "ok" : "FAILED")
	else if (name ~ /^conformance/ || name ~ /^fuzz:/ || name ~ /^kselftest:/) {
		if (!(name in prog_rc))
			progs[++nprogs] = name
		if (name ~ /^fuzz:/)
			have_fuzz = 1
		if (name ~ /^kselftest:/)
			have_kselftest = 1
		prog_rc[name] = rc
	}
	next
}

(section ~ /^conformance/ || section ~ /^fuzz:/) && /^test [^ ]+ \.\.\. / {
	name = $2
	if (section ~ /^fuzz:/)
		name = "fuzz::" name "[" substr(section, 6) "]"
	if ($4 ~ /^(ok|FAILED|ignored)/) {
		result = $4
		sub(/,.*/, "", result)
		record(name, result)
	} else {
		pending = name
	}
	next
}

/^test result: / { summary[section] = 1 }

# kselftest_harness.h: "ok 3 global.name", "ok 4 f.name # SKIP why", "not ok 5 global.name",
# and "# Totals: ..." at the end of a program that finished.
section ~ /^kselftest:/ && /^(not )?ok [0-9]+ / {
	ks_ok = ($1 == "ok")
	name = ks_ok ? $3 : $4
	name = "kselftest::" substr(section, 11) "::" name
	if (ks_ok && $0 ~ / # SKIP/) {
		skip_why = $0
		sub(/^.* # SKIP */, "", skip_why)
		skipped[name] = skip_why
		record(name, "skipped")
	} else
		record(name, ks_ok ? "ok" : "FAILED")
	next
}
section ~ /^kselftest:/ && /^# Totals: / { summary[section] = 1; next }

END {
	# A program that ended without libtest's summary line crashed or ran out of time: the
	# tests it had not finished are not in the count, so the program itself is a failure.
	for (i = 1; i <= nprogs; i++)
		if (!(progs[i] in summary))
			record(progs[i] " (exit " prog_rc[progs[i]] " before its summary line: crashed or timed out)", "FAILED")
	if (mode != "run" && !("conformance" in prog_rc) && finished)
		record("conformance (did not run)", "FAILED")
	if (mode == "debug" && !have_fuzz && finished)
		record("fuzz (did not run)", "FAILED")
	if ((mode == "test" || mode == "debug") && !have_kselftest && finished)
		record("kselftest (did not run)", "FAILED")

	passed = 0
	failed = 0
	nyn_count = 0
	nskip = 0
	ks_pass = 0
	ks_fail = 0
	for (i = 1; i <= count; i++) {
		name = order[i]
		r = results[name]
		if (name ~ /^kselftest::/) {
			if (r == "ok")
				ks_pass++
			else if (r == "FAILED")
				ks_fail++
		}
		if (r == "skipped") {
			nskip++
			print "skipped: " name " (" skipped[name] ")"
		}
		j = listed(name)
		if (j)
			used[j] = 1
		if (r == "ok") {
			passed++
			if (j)
				print "listed as not yet native but passed: " name
		} else if (r == "FAILED") {
			if (j) {
				nyn_count++
				print "not yet native: " name " (" why[j] ")"
			} else {
				failed++
				print "failed: " name
			}
		}
	}
	if (mode == "test")
		for (j = 1; j <= npat; j++)
			if (!used[j])
				print "kernel/not-yet-native: '" pat[j] "' matches no test that ran"
	for (i = 1; i <= nklog; i++)
		print "kernel log: " klog[i]
	if (have_kselftest)
		print "kselftest: " ks_pass " passed, " ks_fail " failed, " nskip " skipped (counted in the line below)"
	print "native: " passed " passed, " failed " failed, " nyn_count " not yet native"

	if (status != "") {
		print "passed=" passed > status
		print "failed=" failed > status
		print "not_yet_native=" nyn_count > status
		print "finished=" finished > status
		print "backend=" sq(backend) > status
		print "kernel_log=" nklog > status
		close(status)
	}
}
