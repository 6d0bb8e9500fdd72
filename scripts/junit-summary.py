#!/usr/bin/env python3
"""`N passed, M failed, K skipped` over ginkgo JUnit reports (scripts/conformance.sh and
scripts/node-e2e.sh).

    junit-summary.py OUT SKIP_REGEX FOCUS_REGEX PART...
    junit-summary.py --focus-of FAILED_TXT     a focus selecting exactly those specs (re-runs)

PART: directories of junit_*.xml, in the order the runs were made. Within a part, a spec that
passed in any attempt (ginkgo -flakeAttempts) passed; a later part (a re-run) replaces what
earlier ones said. Only the focused specs count (the reports list every spec of the suite, most
as skipped); one the skip list names counts as skipped, even in a run made before it was
listed. Writes OUT/{passed,failed,skipped}.txt; prints the counts, the failed specs and those
that flaked (failed, then passed).
"""
import glob
import re
import sys
import xml.etree.ElementTree as ET


def main():
    out, skip, focus = sys.argv[1], re.compile(sys.argv[2]), re.compile(sys.argv[3])
    result, flaked = {}, set()
    for part in sys.argv[4:]:
        here = {}
        for f in sorted(glob.glob(part + "/junit_*.xml")):
            for tc in ET.parse(f).getroot().iter("testcase"):
                name = tc.get("name", "")
                if name.startswith("[") and name.endswith("Suite]"):
                    if tc.find("failure") is not None:
                        print("SUITE FAILURE in %s: %s" % (part, name))
                    continue
                if tc.find("skipped") is not None:
                    here.setdefault(name, "skipped")
                elif tc.find("failure") is not None or tc.find("error") is not None:
                    if here.get(name) == "passed":
                        flaked.add(name)
                    else:
                        here[name] = "failed"
                else:
                    if here.get(name) == "failed":
                        flaked.add(name)
                    here[name] = "passed"
        for name, v in here.items():
            if v == "skipped":
                result.setdefault(name, v)
            else:
                if result.get(name) == "failed" and v == "passed":
                    flaked.add(name)
                result[name] = v
    result = {n: v for n, v in result.items() if focus.search(n)}
    for name in result:
        if skip.search(name):
            result[name] = "skipped"
    by = lambda r: sorted(n for n, v in result.items() if v == r)
    passed, failed, skipped = by("passed"), by("failed"), by("skipped")
    for kind, names in (("passed", passed), ("failed", failed), ("skipped", skipped)):
        with open("%s/%s.txt" % (out, kind), "w") as f:
            f.write("".join(n + "\n" for n in names))
    print("%d passed, %d failed, %d skipped" % (len(passed), len(failed), len(skipped)))
    for f in failed:
        print("FAILED: " + f)
    for f in sorted(n for n in flaked if result.get(n) == "passed"):
        print("FLAKED (failed, then passed on another attempt): " + f)


def focus_of(path):
    """A ginkgo focus matching exactly the specs named in PATH (one a line)."""
    with open(path) as f:
        print("|".join(re.escape(l.strip()) for l in f if l.strip()))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--focus-of":
        focus_of(sys.argv[2])
    else:
        main()
