#!/usr/bin/python3
"""triage.py — sorts the inputs a fuzz run kept (crash-*, timeout-*, oom-*, leak-*) into faults of
our code and faults inside the libraries we call, and groups them by stack.

    /usr/bin/python3 fuzz/triage.py BINARY DIR_OR_FILE...

Each input is run again through BINARY (a harness, libFuzzer or replay build). A fault is OURS when
the first frame past the sanitizer runtime and libc is in our sources, when the memory it touched
was allocated or freed by our code (a buffer we passed too small: the write happens inside
libhdf5's memcpy, the fault is still ours), or when the harness reported a broken house rule.
Otherwise it is LIBRARY (libhdf5, libpng, zlib, Open MPI) and the signature names the library
functions at the top of the stack. A timeout or out-of-memory is listed with the deepest frame it
was caught in. Exit status 1 when any fault is ours or could not be classified.
"""
import os
import re
import subprocess
import sys

OURS = re.compile(r"\b(io|core|jobs|engine|app|mpi|fuzz)/[\w.]+\.c:\d+")
FRAME = re.compile(r"^\s+#(\d+) 0x[0-9a-f]+ in (\S+)(?: (.*))?$|^\s+#(\d+) 0x[0-9a-f]+ +\((.*?)\)")
RUNTIME = re.compile(r"__asan|__interceptor|__sanitizer|__ubsan|__lsan|fuzzer::|^__GI_|^raise$|^abort$|"
                     r"^__libc|^_start$|^main$|^malloc$|^calloc$|^realloc$|^free$|^posix_memalign$|^operator |"
                     r"^__pthread_kill|^pthread_kill|^gsignal|^strdup$|^strlen$|^memcpy$|^memmove$|^memset$")
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:symbolize=1:allocator_may_return_null=1:"
                                         "fast_unwind_on_malloc=0:fast_unwind_on_fatal=0",
           UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
           OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", HQ_FUZZ_TIMEOUT="60")
ENV["LSAN_OPTIONS"] = "leak_check_at_exit=0:use_tls=0:suppressions=" + os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                    "lsan.supp")


def stacks(text):
    """The stacks of a sanitizer report, in order: lists of (function, location)."""
    out, cur = [], None
    for line in text.splitlines():
        m = FRAME.match(line)
        if m:
            if m.group(1) == "0" or m.group(4) == "0" or cur is None:
                cur = []
                out.append(cur)
            if m.group(2):
                cur.append((m.group(2), m.group(3) or ""))
            else:
                cur.append(("?", m.group(5) or ""))
        elif line.strip() and not line.startswith("    "):
            cur = None if cur is not None and not line.strip().startswith("#") else cur
    return out


def first_real(stack):
    for fn, loc in stack:
        if not RUNTIME.search(fn) and "libc.so" not in loc and "libasan" not in loc:
            return fn, loc
    return None


def lib_of(loc):
    m = re.search(r"lib(hdf5|png16|z|mpi|open-pal|open-rte|pmix|hwloc)[\w.-]*\.so", loc)
    return m.group(0).split(".so")[0] if m else os.path.basename(loc.split(":")[0]) or "?"


def classify(binary, path):
    try:
        # The limits of the fuzz run, so that its timeouts and out-of-memory inputs fault here too.
        flags = ["-timeout=60", "-rss_limit_mb=2048", "-malloc_limit_mb=1024"] \
            if os.path.basename(binary).startswith("fuzz_") else []
        r = subprocess.run([binary] + flags + [path], env=ENV, capture_output=True, text=True, timeout=300,
                           errors="replace")
        text = r.stdout + r.stderr
        if r.returncode == -14:
            text += "\nTRIAGE-TIMEOUT"
        elif r.returncode not in (0, 1) and "ERROR" not in text and "runtime error" not in text:
            text += f"\nTRIAGE-EXIT {r.returncode}"
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        text += "\nTRIAGE-TIMEOUT"
    m = re.search(r"RULE BROKEN: (.*)", text)
    if m:
        return "OURS", "rule: " + m.group(1)[:120]
    kind = "no fault reproduced"
    for pat in (r"SUMMARY: AddressSanitizer: ([\w-]+)", r"ERROR: AddressSanitizer: ([\w-]+)", r"ERROR: LeakSanitizer: (.*)", r"runtime error: (.*)",
                r"ERROR: libFuzzer: ([\w-]+)", r"(TRIAGE-TIMEOUT)", r"(TRIAGE-EXIT -?\d+)",
                r"ALARM: (working on the last Unit)"):
        m = re.search(pat, text)
        if m:
            kind = m.group(1)[:80]
            break
    if kind == "no fault reproduced":
        return "UNREPRODUCED", kind
    st = stacks(text)
    if not st:
        return "UNKNOWN", kind + " (no stack)"
    if kind.startswith("detected memory leaks"):
        ours = [s for s in st if any(OURS.search(loc) for _, loc in s)]
        if ours:
            f = first_real(ours[0])
            return "OURS", f"leak from {f[0]} {f[1]}" if f else "leak"
        return "LIBRARY", "leak in " + ",".join(sorted({lib_of(first_real(s)[1]) for s in st if first_real(s)}))
    top = first_real(st[0])
    if top and OURS.search(top[1]):
        return "OURS", f"{kind} in {top[0]} {OURS.search(top[1]).group(0)}"
    # The memory it touched: allocated or freed by our code means the fault is ours.
    for s in st[1:3]:
        f = first_real(s)
        if f and OURS.search(f[1]) and re.search(r"heap-buffer-overflow|use-after-free|double-free", kind):
            return "OURS", f"{kind} on memory of {f[0]} {OURS.search(f[1]).group(0)} (touched in {top[0] if top else '?'})"
    if not top:
        return "UNKNOWN", kind
    funcs = [fn for fn, loc in st[0] if fn != "?" and not RUNTIME.search(fn) and not OURS.search(loc)][:4]
    ours_caller = next((OURS.search(loc).group(0) + " " + fn for fn, loc in st[0] if OURS.search(loc)), "?")
    return "LIBRARY", f"{kind} in {lib_of(top[1])}: {' < '.join(funcs)} (called from {ours_caller})"


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    binary = sys.argv[1]
    files = []
    for p in sys.argv[2:]:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if re.match(r"(crash|timeout|oom|leak|slow-unit)-", f))
        elif os.path.exists(p):
            files.append(p)
    groups = {}
    for f in files:
        cls, sig = classify(binary, f)
        groups.setdefault((cls, sig), []).append(f)
    bad = 0
    for (cls, sig), fs in sorted(groups.items()):
        print(f"{cls:12} {len(fs):3}x  {sig}\n{'':18}e.g. {fs[0]}")
        bad |= cls in ("OURS", "UNKNOWN")
    print(f"triage: {len(files)} inputs, {len(groups)} distinct faults, "
          f"{sum(len(v) for k, v in groups.items() if k[0] == 'OURS')} in our code")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
